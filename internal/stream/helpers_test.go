package stream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// quiet keeps test output readable; LOGBOOK_TEST_LOG=1 shows the logs.
func quiet() *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testServer is an embedded server that a test can stop and restart on the
// same port and store.
type testServer struct {
	t      *testing.T
	dir    string
	listen string
	fsync  string
	ns     *server.Server
}

func startTestServer(t *testing.T, fsync string) *testServer {
	t.Helper()
	ts := &testServer{t: t, dir: t.TempDir(), listen: "127.0.0.1:0", fsync: fsync}
	ts.start()
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) start() {
	ts.t.Helper()
	ns, err := StartServer(ServerConfig{StoreDir: ts.dir, Listen: ts.listen, Fsync: ts.fsync, Logger: quiet()})
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.ns = ns
	// The OS picked the port at the first start; a restart takes it again,
	// so clients reconnect to the URL they know.
	ts.listen = ns.Addr().String()
}

func (ts *testServer) stop() {
	if ts.ns != nil {
		ts.ns.Shutdown()
		ts.ns.WaitForShutdown()
		ts.ns = nil
	}
}

func (ts *testServer) url() string { return "nats://" + ts.listen }

// connect dials urls (comma-separated) and reconnects forever.
func connect(t testing.TB, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectJitter(0, 0), nats.Timeout(2*time.Second), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// openBus sets up the bus on nc's server and opens it.
func openBus(t testing.TB, nc *nats.Conn, cfg SetupConfig) *Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	bus, err := Open(ctx, nc, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return bus
}

func take(t testing.TB, b *Bus, thread, holder string, force bool) *Lease {
	t.Helper()
	l, err := b.TakeLease(context.Background(), thread, LeaseOptions{Holder: holder, Force: force})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

func openWriter(t testing.TB, b *Bus, l *Lease, rolloutID string, o WriterOptions) *Writer {
	t.Helper()
	w, err := b.OpenWriter(context.Background(), l, rolloutID, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = w.Close(ctx)
	})
	return w
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
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

// Records. Ordinals are left to the writer unless a test sets them.

func meta(thread, rolloutID string) rollout.Record {
	return rollout.New(time.Now(), 0, rollout.TypeSessionMeta, rollout.MustJSON(rollout.SessionMeta{
		ID: thread, RolloutID: rolloutID, Source: rollout.Source{Kind: "sim"}, Cwd: "/w",
		HistoryMode: rollout.HistoryLegacy, SchemaVersion: rollout.Version}))
}

func event(v any) rollout.Record {
	return rollout.New(time.Now(), 0, rollout.TypeEventMsg, rollout.MustJSON(v))
}

func userMsg(text string) rollout.Record {
	return event(map[string]string{"type": rollout.EventUserMessage, "message": text})
}

func taskStarted(turn string) rollout.Record {
	return event(rollout.TurnEvent{Type: rollout.EventTaskStarted, TurnID: turn})
}

func taskComplete(turn string) rollout.Record {
	return event(rollout.TurnEvent{Type: rollout.EventTaskComplete, TurnID: turn})
}

func turnContext(turn string) rollout.Record {
	return rollout.New(time.Now(), 0, rollout.TypeTurnContext, rollout.MustJSON(rollout.TurnContext{TurnID: turn, Model: "m", ApprovalPolicy: "never"}))
}

// item is a response_item of about size bytes.
func item(text string, size int) rollout.Record {
	if pad := size - len(text) - 90; pad > 0 {
		text += strings.Repeat("x", pad)
	}
	return rollout.New(time.Now(), 0, rollout.TypeResponseItem, rollout.MessageItem("assistant", text))
}

// readAll reads a rollout through the bus reader and fails on any damage.
func readAll(t testing.TB, b *Bus, rolloutID string) []Entry {
	t.Helper()
	es, err := b.ReadAll(ctxT(t, 30*time.Second), rolloutID, 1)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// checkContiguous asserts ordinals 1..n in order.
func checkContiguous(t testing.TB, es []Entry, n int) {
	t.Helper()
	if len(es) != n {
		t.Fatalf("read %d records, want %d", len(es), n)
	}
	for i, e := range es {
		if e.Ordinal != int64(i+1) || e.Record.Ordinal != int64(i+1) {
			t.Fatalf("record %d has ordinal %d (line says %d)", i, e.Ordinal, e.Record.Ordinal)
		}
	}
}

func id(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
