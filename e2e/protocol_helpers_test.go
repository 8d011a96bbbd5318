package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// This file is the agent side of the protocol tests: what a non-Go agent
// does, written only from docs/PROTOCOL.md with core NATS requests (no
// Logbook package, no JetStream or KV client), plus the served coordinator
// those tests talk to.

// served is a `coordinator serve` on ports the kernel picked.
type served struct {
	dir, natsURL, httpAddr string
	c                      *child
}

// serveOnFreePorts starts `coordinator serve --nats-listen 127.0.0.1:0
// --listen 127.0.0.1:0` and reads the bound addresses from its stdout.
func serveOnFreePorts(t *testing.T, bin string) *served {
	t.Helper()
	s := &served{dir: t.TempDir()}
	s.c = &child{cmd: exec.Command(bin, "serve", "--data", s.dir, "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"),
		stderr: &syncBuffer{}, done: make(chan struct{})}
	s.c.cmd.Stderr = s.c.stderr
	out, err := s.c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() { s.c.err = s.c.cmd.Wait(); close(s.c.done) }()
	t.Cleanup(s.c.kill)
	deadline := time.After(60 * time.Second)
	for s.natsURL == "" || s.httpAddr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				<-s.c.done
				t.Fatalf("coordinator serve exited before printing its addresses: %v\n%s", s.c.err, s.c.stderr)
			}
			if v, ok := strings.CutPrefix(l, "nats: "); ok {
				s.natsURL = v
			}
			if v, ok := strings.CutPrefix(l, "http: http://"); ok {
				s.httpAddr = v
			}
		case <-deadline:
			t.Fatalf("coordinator serve printed no addresses in 60s\n%s", s.c.stderr)
		}
	}
	go func() {
		for range lines { // keep the pipe drained
		}
	}()
	waitHealthy(t, s.c, s.httpAddr, 60*time.Second)
	return s
}

// watermark is the mirror's watermark from GET /status.
func (s *served) watermark(t *testing.T) uint64 {
	t.Helper()
	code, body := httpGet("http://" + s.httpAddr + "/status")
	if code != 200 {
		return 0
	}
	var st struct {
		Mirror struct {
			Watermark uint64 `json:"watermark"`
		} `json:"mirror"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("GET /status: %v: %s", err, body)
	}
	return st.Mirror.Watermark
}

// mirrored waits until the mirror's watermark reaches the last sequence of
// ROLLOUTS.
func (s *served) mirrored(t *testing.T, a *rawAgent) {
	t.Helper()
	last := a.streamLastSeq("ROLLOUTS")
	if !poll(30*time.Second, func() bool { return s.watermark(t) >= last }) {
		t.Fatalf("the mirror's watermark is %d after 30s, ROLLOUTS ends at %d", s.watermark(t), last)
	}
}

// quarantined reads DATA/quarantine/*.json as the doc describes them.
func (s *served) quarantined(t *testing.T) map[uint64]quarantineEntry {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.dir, "quarantine", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]quarantineEntry{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var q quarantineEntry
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if filepath.Base(f) != fmt.Sprintf("%d.json", q.Seq) {
			t.Errorf("%s holds seq %d", f, q.Seq)
		}
		out[q.Seq] = q
	}
	return out
}

type quarantineEntry struct {
	Seq     uint64              `json:"seq"`
	Subject string              `json:"subject"`
	Kind    string              `json:"kind"`
	Reason  string              `json:"reason"`
	Headers map[string][]string `json:"headers"`
	Size    int                 `json:"size"`
}

// runCoordinator runs a coordinator command and returns its stdout; a
// non-zero exit fails the test.
func runCoordinator(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("coordinator %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// rawAgent speaks the protocol with core NATS requests only.
type rawAgent struct {
	t  *testing.T
	nc *nats.Conn
}

func newRawAgent(t *testing.T, url string) *rawAgent {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &rawAgent{t: t, nc: nc}
}

// apiError is the error member of a JetStream reply.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// pubAck is a JetStream publish acknowledgement, or its refusal.
type pubAck struct {
	Stream    string    `json:"stream"`
	Seq       uint64    `json:"seq"`
	Duplicate bool      `json:"duplicate"`
	Error     *apiError `json:"error"`
}

// publish sends a message with headers as a request: the reply is the
// JetStream acknowledgement.
func (a *rawAgent) publish(subject string, hdr [][2]string, data []byte) pubAck {
	a.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	for _, h := range hdr {
		m.Header.Set(h[0], h[1])
	}
	reply, err := a.nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		a.t.Fatalf("publish on %s: %v", subject, err)
	}
	var ack pubAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		a.t.Fatalf("publish on %s: reply %q: %v", subject, reply.Data, err)
	}
	return ack
}

// mustStore publishes and fails the test unless the message was stored.
func (a *rawAgent) mustStore(subject string, hdr [][2]string, data []byte) uint64 {
	a.t.Helper()
	ack := a.publish(subject, hdr, data)
	if ack.Error != nil || ack.Duplicate || ack.Seq == 0 {
		a.t.Fatalf("publish on %s: %+v (error %+v)", subject, ack, ack.Error)
	}
	return ack.Seq
}

// api sends a JetStream API request and decodes the reply into v; it
// returns the reply's error member.
func (a *rawAgent) api(subject string, req any, v any) *apiError {
	a.t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		a.t.Fatal(err)
	}
	if req == nil {
		body = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := a.nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		a.t.Fatalf("%s: %v", subject, err)
	}
	var e struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &e); err != nil {
		a.t.Fatalf("%s: reply %q: %v", subject, reply.Data, err)
	}
	if v != nil && e.Error == nil {
		if err := json.Unmarshal(reply.Data, v); err != nil {
			a.t.Fatalf("%s: %v", subject, err)
		}
	}
	return e.Error
}

// storedMsg is a message read back with $JS.API.STREAM.MSG.GET.
type storedMsg struct {
	Subject string
	Seq     uint64
	Header  nats.Header
	Data    []byte
}

// get reads a stream message through the stream leader; nil when none
// matches (10037).
func (a *rawAgent) get(stream string, req map[string]any) *storedMsg {
	a.t.Helper()
	var r struct {
		Message struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Hdrs    string `json:"hdrs"`
			Data    string `json:"data"`
		} `json:"message"`
	}
	if e := a.api("$JS.API.STREAM.MSG.GET."+stream, req, &r); e != nil {
		if e.ErrCode == 10037 {
			return nil
		}
		a.t.Fatalf("get from %s %v: %+v", stream, req, e)
	}
	m := &storedMsg{Subject: r.Message.Subject, Seq: r.Message.Seq, Header: nats.Header{}}
	var err error
	if m.Data, err = base64.StdEncoding.DecodeString(r.Message.Data); err != nil {
		a.t.Fatal(err)
	}
	if r.Message.Hdrs != "" {
		raw, err := base64.StdEncoding.DecodeString(r.Message.Hdrs)
		if err != nil {
			a.t.Fatal(err)
		}
		if m.Header, err = nats.DecodeHeadersMsg(raw); err != nil {
			a.t.Fatal(err)
		}
	}
	return m
}

// streamLastSeq is a stream's state.last_seq ($JS.API.STREAM.INFO).
func (a *rawAgent) streamLastSeq(stream string) uint64 {
	a.t.Helper()
	var info struct {
		State struct {
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
	}
	if e := a.api("$JS.API.STREAM.INFO."+stream, nil, &info); e != nil {
		a.t.Fatalf("info of %s: %+v", stream, e)
	}
	return info.State.LastSeq
}

// crc32c is CRC-32C as the doc specifies it, bit by bit: reflected
// polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF, 8 lowercase
// hex digits.
func crc32c(b []byte) string {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for i := 0; i < 8; i++ {
			if crc&1 == 1 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return fmt.Sprintf("%08x", ^crc)
}

// line is a record line in the doc's member order, crc computed.
func line(ts string, ord int64, typ, payload string) string {
	return fmt.Sprintf(`{"timestamp":%q,"ordinal":%d,"type":%q,"payload":%s,"crc":%q}`, ts, ord, typ, payload, crc32c([]byte(payload)))
}

// packData joins lines into a pack payload, each '\n'-terminated.
func packData(lines ...string) []byte {
	return []byte(strings.Join(lines, "\n") + "\n")
}

// packHeaders are a pack's headers as the doc lists them.
func packHeaders(rollout string, first, last int64, epoch, expected uint64, data []byte) [][2]string {
	return [][2]string{
		{"Nats-Msg-Id", fmt.Sprintf("%s:%d-%d:%d", rollout, first, last, epoch)},
		{"Logbook-Pack", "1"},
		{"Logbook-First", fmt.Sprint(first)},
		{"Logbook-Last", fmt.Sprint(last)},
		{"Logbook-Epoch", fmt.Sprint(epoch)},
		{"Logbook-CRC", crc32c(data)},
		{"Nats-Expected-Last-Subject-Sequence", fmt.Sprint(expected)},
	}
}
