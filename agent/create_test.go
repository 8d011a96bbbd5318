package agent_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// interruptedCreate leaves on the bus what a create that died after
// flushing the thread's session_meta and before its THREADS entry leaves.
func interruptedCreate(t *testing.T, b *streamtest.Bus, meta rollout.SessionMeta) {
	t.Helper()
	ctx := testCtx(t)
	lease, err := b.Bus.TakeLease(ctx, meta.ID, stream.LeaseOptions{Holder: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Bus.OpenWriter(ctx, lease, meta.RolloutID, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, (&rollout.Builder{}).Meta(meta)); err != nil {
		t.Fatal(err)
	}
	w.Materialize()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close(ctx)
	lease.Release(ctx)
}

// TestSpawnFinishesAnInterruptedCreate: the parent's retry of a spawn
// whose child create died before THREADS adopts the child's rollout: one
// rollout, one session_meta, THREADS naming it, no duplicate_thread.
func TestSpawnFinishesAnInterruptedCreate(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	c := connect(t, b, "p")
	root, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	interruptedCreate(t, b, rollout.SessionMeta{ID: "kid", RolloutID: "kid", ParentThreadID: "root",
		Source: rollout.Source{Kind: "agent"}, AgentRole: "builder", HistoryMode: agent.Legacy})

	child, err := root.Spawn(ctx, agent.ThreadSpec{ID: "kid", Role: "builder"}, agent.Task{Body: "build"})
	if err != nil {
		t.Fatalf("spawn after an interrupted create: %v", err)
	}
	if child.Rollout != "kid" {
		t.Errorf("child rollout %s, want the interrupted create's (kid)", child.Rollout)
	}
	e, err := b.Bus.Threads().Get(ctx, "kid")
	if err != nil || string(e.Value()) != "kid" {
		t.Fatalf("THREADS kid = %v, %v; want kid", e, err)
	}
	es := entries(t, b, "kid")
	if len(es) != 1 || es[0].Record.Type != rollout.TypeSessionMeta {
		t.Errorf("kid holds %d records, want its one session_meta", len(es))
	}
	tr := lineage(t, b, "root", "kid")
	if len(tr.Problems) != 0 {
		t.Errorf("tree problems: %+v", tr.Problems)
	}
	if n := tr.Threads["kid"]; n == nil || len(n.Rollouts) != 1 || n.Current.Meta.ParentThreadID != "root" {
		t.Errorf("kid in the tree: %+v", n)
	}
}

// TestCreateRefusesAnotherCreatesRollout: a rollout left by a create with
// other settings (another parent here), or a thread that exists, is not
// taken over: ErrThreadExists, nothing written.
func TestCreateRefusesAnotherCreatesRollout(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	c := connect(t, b, "p")
	root, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	interruptedCreate(t, b, rollout.SessionMeta{ID: "kid", RolloutID: "kid", ParentThreadID: "elsewhere",
		Source: rollout.Source{Kind: "agent"}, HistoryMode: agent.Legacy})
	before := len(entries(t, b, "root"))

	_, err = root.Spawn(ctx, agent.ThreadSpec{ID: "kid"}, agent.Task{})
	if !errors.Is(err, agent.ErrThreadExists) || !strings.Contains(err.Error(), "elsewhere") {
		t.Fatalf("spawn over another create's rollout: %v, want ErrThreadExists naming the other parent", err)
	}
	if n := len(entries(t, b, "kid")); n != 1 {
		t.Errorf("kid holds %d records after the refusal, want 1", n)
	}
	if _, err := b.Bus.Threads().Get(ctx, "kid"); err == nil {
		t.Error("the refused create wrote THREADS")
	}
	if after := len(entries(t, b, "root")); after != before {
		t.Errorf("the refused spawn logged %d records in the parent", after-before)
	}
	if _, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "root"}); !errors.Is(err, agent.ErrThreadExists) {
		t.Errorf("StartRoot of an existing thread: %v", err)
	}
}

// TestStartRootFinishesAnInterruptedCreate: the same for a root, with an
// explicit rollout id.
func TestStartRootFinishesAnInterruptedCreate(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	c := connect(t, b, "p")
	interruptedCreate(t, b, rollout.SessionMeta{ID: "solo", RolloutID: "solo-r1",
		Source: rollout.Source{Kind: "agent"}, Cwd: "/w", HistoryMode: agent.Paginated})
	th, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "solo", RolloutID: "solo-r1", Cwd: "/w", HistoryMode: agent.Paginated})
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if e, err := b.Bus.Threads().Get(ctx, "solo"); err != nil || string(e.Value()) != "solo-r1" {
		t.Fatalf("THREADS solo: %v", err)
	}
	if n := len(entries(t, b, "solo")); n != 1 {
		t.Errorf("solo holds %d records, want 1", n)
	}
}
