package stream

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

func TestMsgIDRoundTrip(t *testing.T) {
	id := MsgID("01JABC_x-y", 7, 12, 42)
	if id != "01JABC_x-y:7-12:42" {
		t.Fatalf("msg id %q", id)
	}
	r, f, l, e, err := ParseMsgID(id)
	if err != nil || r != "01JABC_x-y" || f != 7 || l != 12 || e != 42 {
		t.Fatalf("parsed %q %d %d %d %v", r, f, l, e, err)
	}
	for _, bad := range []string{"", "r", "r:1-2", "r:2-1:3", "r:0-1:3", ":1-2:3", "r:1-2:x", "r:12:3", "r:1-x:3"} {
		if _, _, _, _, err := ParseMsgID(bad); !errors.Is(err, ErrBadPack) {
			t.Errorf("ParseMsgID(%q): %v", bad, err)
		}
	}
}

func TestDecodePack(t *testing.T) {
	line := func(ord int64) []byte { return expectLine(item(id("x", int(ord)), 100), ord) }
	good := &pack{rollout: "ro1", first: 3, last: 4, epoch: 9, data: append(line(3), line(4)...)}
	m := good.msg()
	p, err := DecodePack(m.Subject, 5, m.Header, m.Data)
	if err != nil || p.First != 3 || p.Last != 4 || p.Epoch != 9 || len(p.Lines) != 2 || p.Seq != 5 {
		t.Fatalf("good pack: %+v %v", p, err)
	}
	cases := map[string]func(m *nats.Msg){
		"no version":      func(m *nats.Msg) { m.Header.Del(HeaderPack) },
		"newer version":   func(m *nats.Msg) { m.Header.Set(HeaderPack, "2") },
		"bad first":       func(m *nats.Msg) { m.Header.Set(HeaderFirst, "0") },
		"last<first":      func(m *nats.Msg) { m.Header.Set(HeaderLast, "2") },
		"msg id mismatch": func(m *nats.Msg) { m.Header.Set(HeaderMsgID, "ro1:3-4:8") },
		"payload crc":     func(m *nats.Msg) { m.Data = append([]byte{}, m.Data...); m.Data[10] ^= 1 },
		"line count":      func(m *nats.Msg) { m.Header.Set(HeaderLast, "5"); m.Header.Set(HeaderMsgID, "ro1:3-5:9") },
		"unterminated": func(m *nats.Msg) {
			m.Data = m.Data[:len(m.Data)-1]
			m.Header.Set(HeaderCRC, rollout.Checksum(m.Data))
		},
		"bad subject": func(m *nats.Msg) { m.Subject = "other.ro1" },
	}
	for name, damage := range cases {
		m := good.msg()
		damage(m)
		_, err := DecodePack(m.Subject, 5, m.Header, m.Data)
		var pe *PackError
		if !errors.Is(err, ErrBadPack) || !errors.As(err, &pe) || pe.Seq != 5 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestReaderReportsDamage: foreign or damaged messages on a rollout subject
// are reported, one error each, and reading goes on.
func TestReaderReportsDamage(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 30*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{})
	for _, r := range []rollout.Record{meta("th1", "ro1"), userMsg("a"), item("b", 100)} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pub := func(m *nats.Msg) {
		t.Helper()
		if _, err := bus.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	raw := nats.NewMsg(RolloutSubject("ro1"))
	raw.Data = []byte("not a pack\n")
	pub(raw) // no headers at all
	badCRC := expectLine(item("c", 100), 4)
	badCRC[len(badCRC)-4] ^= 1 // inside the crc field
	pub((&pack{rollout: "ro1", first: 4, last: 5, epoch: l.Epoch(), data: append(badCRC, expectLine(item("d", 100), 5)...)}).msg())
	pub((&pack{rollout: "ro1", first: 9, last: 9, epoch: l.Epoch(), data: expectLine(item("e", 100), 9)}).msg())

	r, err := bus.ReadRollout(ctx, "ro1", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for {
		e, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		var pe *PackError
		switch {
		case err == nil:
			got = append(got, "ok")
		case errors.Is(err, ErrBadPack) && errors.As(err, &pe):
			got = append(got, "bad-pack")
		case errors.Is(err, rollout.ErrCRCMismatch) && errors.As(err, &pe) && pe.Ordinal == 4:
			got = append(got, "crc")
		case errors.Is(err, rollout.ErrOrdinalGap) && e.Ordinal == 9 && e.Record.Type != "":
			got = append(got, "gap+record")
		default:
			t.Fatalf("unexpected: %+v %v", e, err)
		}
	}
	if s := strings.Join(got, ","); s != "ok,ok,ok,bad-pack,crc,ok,gap+record" {
		t.Fatalf("read %s", s)
	}
}

func TestSetupIdempotentAndStrict(t *testing.T) {
	ts := startTestServer(t, FsyncInterval)
	nc := connect(t, ts.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	// A stream that exists with another configuration is reported, not changed.
	bad := MailConfig(1)
	bad.Retention = jetstream.LimitsPolicy
	if _, err := js.CreateStream(ctx, bad); err != nil {
		t.Fatal(err)
	}
	err = Setup(ctx, js, SetupConfig{})
	if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "stream MAIL has retention") {
		t.Fatalf("mismatching MAIL: %v", err)
	}
	t.Log(err)
	if err := js.DeleteStream(ctx, StreamMail); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := Setup(ctx, js, SetupConfig{}); err != nil {
			t.Fatalf("setup %d: %v", i, err)
		}
	}
	s, err := js.Stream(ctx, StreamRollouts)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; c.MaxAge != 0 || c.MaxBytes != -1 || c.MaxMsgs != -1 || c.Duplicates != DedupeWindow || !c.AllowDirect || c.Storage != jetstream.FileStorage {
		t.Fatalf("ROLLOUTS config %+v", c)
	}
	err = Setup(ctx, js, SetupConfig{LeaseTTL: time.Minute})
	if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "bucket LEASES has max age") {
		t.Fatalf("other lease TTL: %v", err)
	}
	s, _ = js.Stream(ctx, StreamRollouts)
	cfg := s.CachedInfo().Config
	cfg.MaxAge = time.Hour
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := Setup(ctx, js, SetupConfig{}); !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "stream ROLLOUTS has max age 1h0m0s") {
		t.Fatalf("ROLLOUTS with a max age: %v", err)
	}
}

// dedupeTrap shows the server behaviour the epoch in the msg id guards
// against: the same msg id with other bytes and a stale expected sequence is
// refused with 10071 on one replica, but acknowledged as a duplicate of the
// first bytes on a replicated stream.
func dedupeTrap(t *testing.T, bus *Bus, replicated bool) {
	ctx := ctxT(t, 30*time.Second)
	subj := RolloutSubject("trap")
	publish := func(data string) (*jetstream.PubAck, error) {
		m := nats.NewMsg(subj)
		m.Data = []byte(data)
		return bus.js.PublishMsg(ctx, m, jetstream.WithMsgID("trap:1-1:no-epoch"), jetstream.WithExpectLastSequencePerSubject(0))
	}
	first, err := publish("zombie's bytes")
	if err != nil {
		t.Fatal(err)
	}
	second, err := publish("resumer's bytes")
	if replicated {
		if err != nil || !second.Duplicate || second.Sequence != first.Sequence {
			t.Fatalf("R3: second publish %+v %v; NATS-NOTES says: acked as a duplicate", second, err)
		}
	} else if !isWrongLastSeq(err) {
		t.Fatalf("R1: second publish %+v %v; NATS-NOTES says: 10071", second, err)
	}
	got, err := bus.getMsg(ctx, first.Sequence, "", "")
	if err != nil || string(got.Data) != "zombie's bytes" {
		t.Fatalf("stored %q %v", got.Data, err)
	}
}

func TestDedupeTrapOneServer(t *testing.T) {
	_, bus := single(t)
	dedupeTrap(t, bus, false)
}
