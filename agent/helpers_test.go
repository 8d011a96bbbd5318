package agent_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
	"github.com/logbook-agents/logbook/internal/tree"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// testBus starts a real embedded JetStream set up as `coordinator serve`
// sets it up, with a short lease TTL.
func testBus(t testing.TB) *streamtest.Bus {
	t.Helper()
	return streamtest.New(t, streamtest.Options{LeaseTTL: time.Second})
}

// connect is one agent process.
func connect(t testing.TB, b *streamtest.Bus, name string) *agent.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.Connect(ctx, b.Server.ClientURL(), agent.Options{Name: name, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// records reads a thread's current view from the bus.
func records(t *testing.T, b *streamtest.Bus, thread string) rollout.Log {
	t.Helper()
	src, err := ops.Load(testCtx(t), b.Bus, thread)
	if err != nil {
		t.Fatal(err)
	}
	return src.View
}

// entries are the records of a thread's view on the bus.
func entries(t *testing.T, b *streamtest.Bus, thread string) []rollout.Entry {
	t.Helper()
	c, err := records(t, b, thread).Forward(0)
	if err != nil {
		t.Fatal(err)
	}
	var out []rollout.Entry
	err = rollout.Scan(c, func(ce *rollout.CorruptionError) error { return ce }, func(e rollout.Entry) (bool, error) {
		out = append(out, e)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// state replays a thread from the bus, as the coordinator would.
func state(t *testing.T, b *streamtest.Bus, thread string) *replay.State {
	t.Helper()
	st, err := replay.Fast(records(t, b, thread), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lineage builds the tree and ledger of some threads from the bus.
func lineage(t *testing.T, b *streamtest.Bus, threads ...string) *tree.Tree {
	t.Helper()
	c, err := ops.CorpusFromBus(testCtx(t), b.Bus, threads...)
	if err != nil {
		t.Fatal(err)
	}
	return tree.Build(c, tree.Options{})
}
