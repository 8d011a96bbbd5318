package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// quiet keeps test output readable; LOGBOOK_TEST_LOG=1 shows the logs.
func quiet() *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// env is an embedded bus and a data dir.
type env struct {
	t   testing.TB
	ns  *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	bus *stream.Bus
	dir string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ns, err := stream.StartServer(stream.ServerConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	if err := stream.Setup(ctx, js, stream.SetupConfig{}); err != nil {
		t.Fatal(err)
	}
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	// Hand-made packs (packMsg) carry epochs up to 9: issue that many lease
	// revisions, or the mirror refuses them as future_epoch.
	kv, err := js.KeyValue(ctx, stream.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 9; i++ {
		if _, err := kv.Put(ctx, "test-epochs", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	return &env{t: t, ns: ns, nc: nc, js: js, bus: bus, dir: t.TempDir()}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// running is a mirror started by a test.
type running struct {
	m    *Mirror
	ix   *index.Index
	stop func()
}

// start opens the data dir's mirror (and index, when withIndex) and runs it
// until stop or the end of the test.
func (e *env) start(cfg Config, withIndex bool) *running {
	e.t.Helper()
	cfg.Dir = e.dir
	cfg.Logger = quiet()
	if cfg.ColdAfter == 0 {
		cfg.ColdAfter = -1
	}
	ctx := context.Background()
	m, err := Open(ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &running{m: m}
	if withIndex {
		if r.ix, err = index.Open(ctx, e.dir, index.Options{Logger: quiet()}); err != nil {
			e.t.Fatal(err)
		}
		if _, err := r.ix.CatchUp(ctx, nil); err != nil {
			e.t.Fatal(err)
		}
		m.SetIndex(r.ix)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx, e.bus) }()
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("mirror Run: %v", err)
		}
		if r.ix != nil {
			r.ix.Close()
		}
		m.Close()
	}
	e.t.Cleanup(r.stop)
	return r
}

// lastSeq is the stream's last sequence.
func (e *env) lastSeq() uint64 {
	e.t.Helper()
	s, err := e.js.Stream(ctxT(e.t, 10*time.Second), stream.StreamRollouts)
	if err != nil {
		e.t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

// caughtUp waits until the mirror's watermark reaches the stream's end.
func (e *env) caughtUp(r *running) {
	e.t.Helper()
	want := e.lastSeq()
	waitFor(e.t, 20*time.Second, fmt.Sprintf("mirror watermark %d", want), func() bool { return r.m.Watermark() >= want })
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writer is a rollout written through the real writer, its lines kept.
type writer struct {
	t     testing.TB
	id    string
	w     *stream.Writer
	l     *stream.Lease
	lines [][]byte // lines[k-1] is ordinal k with its '\n'
}

// openWriter takes the thread's lease and opens its rollout; a new rollout
// starts with meta (nil: a plain session_meta).
func (e *env) openWriter(id string, m *rollout.SessionMeta) *writer {
	e.t.Helper()
	ctx := ctxT(e.t, 30*time.Second)
	l, err := e.bus.TakeLease(ctx, id, stream.LeaseOptions{Holder: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := e.bus.OpenWriter(ctx, l, id, stream.WriterOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	wr := &writer{t: e.t, id: id, w: w, l: l}
	e.t.Cleanup(func() { wr.close() })
	if w.Next() == 1 {
		if m == nil {
			m = &rollout.SessionMeta{ID: id, RolloutID: id, Source: rollout.Source{Kind: "sim"}, Cwd: "/w",
				HistoryMode: rollout.HistoryLegacy, SchemaVersion: rollout.Version}
		}
		wr.add(rollout.New(time.Now(), 0, rollout.TypeSessionMeta, rollout.MustJSON(*m)))
		w.Materialize()
	}
	return wr
}

func (w *writer) add(r rollout.Record) {
	w.t.Helper()
	ord, err := w.w.Append(context.Background(), r)
	if err != nil {
		w.t.Fatal(err)
	}
	r.Ordinal, r.CRC = ord, rollout.Checksum(r.Payload)
	for int64(len(w.lines)) < ord-1 {
		w.lines = append(w.lines, nil) // written by an earlier writer
	}
	w.lines = append(w.lines, r.Encode())
}

// items appends n response items and flushes.
func (w *writer) items(n int, tag string) {
	w.t.Helper()
	for i := 0; i < n; i++ {
		w.add(rollout.New(time.Now(), 0, rollout.TypeResponseItem, rollout.MessageItem("assistant", fmt.Sprintf("%s %s %d %s", w.id, tag, i, strings.Repeat("x", 100)))))
	}
	if err := w.w.Flush(ctxT(w.t, 30*time.Second)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *writer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.w.Close(ctx)
	_ = w.l.Release(ctx)
}

// readFile returns a mirror file's JSONL (decompressed) and whether it is
// compressed; "" when there is none.
func readFile(t testing.TB, dir, id string) (string, bool) {
	t.Helper()
	p := datadir.MirrorPath(dir, id)
	if p == "" {
		return "", false
	}
	b, err := readMirror(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), strings.HasSuffix(p, zstExt)
}

// busLines reads a rollout from the bus: its lines with '\n', in order.
func (e *env) busLines(id string) string {
	e.t.Helper()
	es, err := e.bus.ReadAll(ctxT(e.t, 30*time.Second), id, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	var b bytes.Buffer
	for i, x := range es {
		if x.Ordinal != int64(i+1) {
			e.t.Fatalf("rollout %s: bus record %d has ordinal %d", id, i, x.Ordinal)
		}
		b.Write(x.Record.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// checkEqual asserts that a rollout's mirror file holds exactly the bus's
// records, byte for byte.
func (e *env) checkEqual(id string) {
	e.t.Helper()
	got, _ := readFile(e.t, e.dir, id)
	if want := e.busLines(id); got != want {
		e.t.Fatalf("rollout %s: mirror file (%d bytes, %d lines) differs from the bus (%d bytes, %d lines)",
			id, len(got), strings.Count(got, "\n"), len(want), strings.Count(want, "\n"))
	}
}

// packMsg builds a ROLLOUTS message by hand, as any publisher could.
func packMsg(subject string, first int64, epoch uint64, lines ...[]byte) *nats.Msg {
	m := nats.NewMsg(subject)
	var data []byte
	for _, l := range lines {
		data = append(append(data, l...), '\n')
	}
	m.Data = data
	rid := strings.TrimPrefix(subject, "rollout.")
	last := first + int64(len(lines)) - 1
	m.Header.Set(stream.HeaderMsgID, stream.MsgID(rid, first, last, epoch))
	m.Header.Set(stream.HeaderPack, "1")
	m.Header.Set(stream.HeaderFirst, strconv.FormatInt(first, 10))
	m.Header.Set(stream.HeaderLast, strconv.FormatInt(last, 10))
	m.Header.Set(stream.HeaderEpoch, strconv.FormatUint(epoch, 10))
	m.Header.Set(stream.HeaderCRC, rollout.Checksum(data))
	return m
}

// line encodes a record with an ordinal.
func line(ord int64, typ string, payload []byte) []byte {
	r := rollout.New(time.Unix(1_800_000_000, 0), ord, typ, payload)
	return r.Append(nil)
}

func metaLine(thread, rid string, base *rollout.HistoryPosition) []byte {
	return line(1, rollout.TypeSessionMeta, rollout.MustJSON(rollout.SessionMeta{ID: thread, RolloutID: rid,
		Source: rollout.Source{Kind: "sim"}, Cwd: "/w", HistoryMode: rollout.HistoryPaginated, HistoryBase: base, SchemaVersion: rollout.Version}))
}

func itemLine(ord int64, text string) []byte {
	return line(ord, rollout.TypeResponseItem, rollout.MessageItem("assistant", text))
}

// publish publishes a message with a plain JetStream client (no checks).
func (e *env) publish(m *nats.Msg) uint64 {
	e.t.Helper()
	ack, err := e.js.PublishMsg(ctxT(e.t, 10*time.Second), m)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

func writeZstBytes(dst *bytes.Buffer, data []byte) error {
	return rollout.WriteZst(dst, bytes.NewReader(data))
}

// setWatermark rewrites a stopped mirror's watermark.
func setWatermark(t testing.TB, dir string, seq uint64) {
	t.Helper()
	sf, err := openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.close()
	s := sf.cur
	s.Seq = seq
	if err := sf.write(s); err != nil {
		t.Fatal(err)
	}
}
