package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

// TestStaleEpochAfterCrash: the highest epoch a rollout's accepted packs
// carried survives a SIGKILL of `coordinator serve`. A writer (epoch > 0)
// writes through the real binary, which is SIGKILLed once the watermark
// covers it and started again on the same data dir; a pack continuing the
// rollout at epoch 0 is then published raw: it is quarantined as
// stale_epoch and the mirror file holds exactly the writer's records.
func TestStaleEpochAfterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the coordinator binary")
	}
	bin := buildCoordinator(t)
	ns := externalNATS(t, "ext")
	dir := t.TempDir()
	args := []string{"serve", "--data", dir, "--nats", ns.ClientURL(), "--listen", "127.0.0.1:0"}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := startServe(t, bin, args...)
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	lines := writeRollout(t, ctx, bus, "victim", 5)
	c.caughtUp(t, js)

	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := c.wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("coordinator exit: %v, want killed", err)
	}

	c = startServe(t, bin, args...)
	// Another rollout mirrored: the start-up checks (which would read the
	// bus's packs of "victim" if they ran after the stale pack) are done.
	writeRollout(t, ctx, bus, "other", 1)
	c.caughtUp(t, js)
	next := int64(len(lines)) + 1
	rec := rollout.New(time.Unix(1_800_000_000, 0), next, rollout.TypeResponseItem, rollout.MessageItem("assistant", "stale"))
	stale := publishRaw(t, ctx, js, "victim", next, 0, rec.Append(nil))
	c.caughtUp(t, js)

	got, err := os.ReadFile(datadir.PlainPath(dir, "victim"))
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Join(lines, nil); !bytes.Equal(got, want) {
		t.Fatalf("mirror holds\n%s\nwant\n%s", got, want)
	}
	qs, err := mirror.ReadQuarantine(dir)
	if err != nil || len(qs) != 1 || qs[0].Kind != mirror.KindStaleEpoch || qs[0].Seq != stale {
		t.Fatalf("quarantine: %+v (%v), want stale_epoch at seq %d", qs, err, stale)
	}
}

// serveChild is a `coordinator serve` whose HTTP address is read back from
// its stdout (it listens on port 0).
type serveChild struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	errb   *lockedBuffer
	done   chan struct{}
	err    error
	status string // http://ADDR/status
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var httpLine = regexp.MustCompile(`(?m)^http: (http://\S+)$`)

func startServe(t *testing.T, bin string, args ...string) *serveChild {
	t.Helper()
	c := &serveChild{cmd: exec.Command(bin, args...), out: &lockedBuffer{}, errb: &lockedBuffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.errb
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); <-c.done })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := httpLine.FindStringSubmatch(c.out.String()); m != nil {
			c.status = m[1] + "/status"
			return c
		}
		select {
		case <-c.done:
			t.Fatalf("coordinator exited: %v\n%s", c.err, c.errb)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator printed no http address in 60s\n%s", c.errb)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *serveChild) wait() error { <-c.done; return c.err }

// caughtUp waits until the coordinator's mirror watermark (GET /status)
// reaches the stream's last sequence.
func (c *serveChild) caughtUp(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream.StreamRollouts)
	if err != nil {
		t.Fatal(err)
	}
	want := s.CachedInfo().State.LastSeq
	var wm uint64
	poll(t, 30*time.Second, fmt.Sprintf("mirror watermark %d", want), func() bool {
		resp, err := http.Get(c.status)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var st struct {
			Mirror mirror.Status `json:"mirror"`
		}
		if json.Unmarshal(b, &st) != nil {
			return false
		}
		wm = st.Mirror.Watermark
		return wm >= want
	})
}

// writeRollout writes a new rollout (session_meta and n items) under a
// fresh lease and returns its lines, each with its '\n'.
func writeRollout(t *testing.T, ctx context.Context, bus *stream.Bus, id string, n int) [][]byte {
	t.Helper()
	l, err := bus.TakeLease(ctx, id, stream.LeaseOptions{Holder: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Epoch() == 0 {
		t.Fatal("lease epoch 0")
	}
	w, err := bus.OpenWriter(ctx, l, id, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	var lines [][]byte
	add := func(r rollout.Record) {
		ord, err := w.Append(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		r.Ordinal, r.CRC = ord, rollout.Checksum(r.Payload)
		lines = append(lines, r.Encode())
	}
	add(rollout.New(time.Now(), 0, rollout.TypeSessionMeta, rollout.MustJSON(rollout.SessionMeta{ID: id, RolloutID: id,
		Source: rollout.Source{Kind: "sim"}, Cwd: "/w", HistoryMode: rollout.HistoryLegacy, SchemaVersion: rollout.Version})))
	for i := range n {
		add(rollout.New(time.Now(), 0, rollout.TypeResponseItem, rollout.MessageItem("assistant", fmt.Sprint(id, " ", i))))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return lines
}

// publishRaw publishes a pack of one record line by hand, as any publisher
// on rollout.* could (no expected sequence, any epoch).
func publishRaw(t *testing.T, ctx context.Context, js jetstream.JetStream, id string, first int64, epoch uint64, line []byte) uint64 {
	t.Helper()
	m := nats.NewMsg(stream.RolloutSubject(id))
	m.Data = append(bytes.Clone(line), '\n')
	m.Header.Set(stream.HeaderMsgID, stream.MsgID(id, first, first, epoch))
	m.Header.Set(stream.HeaderPack, "1")
	m.Header.Set(stream.HeaderFirst, strconv.FormatInt(first, 10))
	m.Header.Set(stream.HeaderLast, strconv.FormatInt(first, 10))
	m.Header.Set(stream.HeaderEpoch, strconv.FormatUint(epoch, 10))
	m.Header.Set(stream.HeaderCRC, rollout.Checksum(m.Data))
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
