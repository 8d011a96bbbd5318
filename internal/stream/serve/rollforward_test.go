package serve

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// TestServeRollsForward: a revert that died at the crash point between its
// seal and its THREADS switch is finished when serve starts.
func TestServeRollsForward(t *testing.T) {
	ns := externalNATS(t, "rf")
	dir := t.TempDir()
	_, stop := start(t, Config{DataDir: dir, NATSURL: ns.ClientURL(), Listen: "127.0.0.1:0"})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var b rollout.Builder
	tail := stream.Tail{}
	for _, r := range []rollout.Record{
		b.Meta(rollout.SessionMeta{ID: "R", RolloutID: "rR1", Source: rollout.Source{Kind: "sim"}, Cwd: "/", HistoryMode: rollout.HistoryPaginated}),
		b.TaskStarted("t1"), b.UserMessage("one"), b.Message("user", "one"), b.TaskComplete("t1"),
		b.TaskStarted("t2"), b.UserMessage("two"), b.Message("user", "two"), b.TaskComplete("t2"),
	} {
		if tail, err = bus.AppendAt(ctx, "rR1", tail, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bus.Threads().Create(ctx, "R", []byte("rR1")); err != nil {
		t.Fatal(err)
	}
	p, err := ops.PlanRevert(ctx, bus, "R", "t2")
	if err != nil {
		t.Fatal(err)
	}
	disarm := faults.Arm("revert.after-seal", 1, func(string) { panic("crash") })
	func() {
		defer func() { recover() }()
		p.Commit(ctx, bus) //nolint:errcheck // it dies at the crash point
	}()
	disarm()
	if e, _ := bus.Threads().Get(ctx, "R"); string(e.Value()) != "rR1" {
		t.Fatalf("the pointer moved before the crash point: %s", e.Value())
	}

	start(t, Config{DataDir: dir, NATSURL: ns.ClientURL(), Listen: "127.0.0.1:0"})
	if e, err := bus.Threads().Get(ctx, "R"); err != nil || string(e.Value()) != p.Next {
		t.Fatalf("after serve started THREADS R = %s (%v), want %s", e.Value(), err, p.Next)
	}
}
