package ops

import (
	"errors"
	"testing"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestForkCopyAndReference: both modes give the child the same history,
// which later appends to the parent never change.
func TestForkCopyAndReference(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	a := newAgent(t, bus.Bus, "P", "rP", rollout.HistoryLegacy).turn("t1", true).turn("t2", true).turn("t3", true)
	a.flush()
	src, err := Load(ctx, bus.Bus, "P")
	if err != nil {
		t.Fatal(err)
	}
	var states []*replay.State
	for _, mode := range []string{ModeCopy, ModeReference} {
		res, err := Fork(ctx, bus.Bus, src, ForkOptions{AfterTurn: "t2", Mode: mode, Thread: "F-" + mode, Holder: "test"})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if res.AbortedTurn != "" {
			t.Errorf("%s: forking after a completed turn aborted %s", mode, res.AbortedTurn)
		}
		states = append(states, res.State)
		want := []string{"user:please t1", "assistant:did t1", "user:please t2", "assistant:did t2"}
		if got := texts(res.State); !equal(got, want) {
			t.Errorf("%s: child history %v, want %v", mode, got, want)
		}
		if res.State.ForkedFromID != "P" || res.State.ThreadID != "F-"+mode {
			t.Errorf("%s: identity %s forked from %s", mode, res.State.ThreadID, res.State.ForkedFromID)
		}
	}
	if states[0].Model != states[1].Model || !equal(texts(states[0]), texts(states[1])) {
		t.Error("copy and reference forks differ")
	}
	// The parent goes on; the children's past does not move.
	a.turn("t4", true).stop()
	for _, child := range []string{"F-copy", "F-reference"} {
		c, err := Load(ctx, bus.Bus, child)
		if err != nil {
			t.Fatal(err)
		}
		st, err := replay.Fast(c.View, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(texts(st)) != 4 {
			t.Errorf("%s: a later parent append changed the child's history: %v", child, texts(st))
		}
	}
}

// TestForkActiveTurn: a fork inside a turn that has not ended gives the child
// a synthesized interrupted abort; a rolled-back turn is no fork point.
func TestForkActiveTurn(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	a := newAgent(t, bus.Bus, "P", "rP", rollout.HistoryLegacy).turn("t1", true).turn("t2", true)
	a.add(a.b.RolledBack(1)).turn("t3", false).flush()
	src, err := Load(ctx, bus.Bus, "P")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Fork(ctx, bus.Bus, src, ForkOptions{Thread: "F", Holder: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res.AbortedTurn != "t3" {
		t.Errorf("aborted %q, want t3", res.AbortedTurn)
	}
	got := turnStatus(res.State)
	if got["t3"] != replay.StatusAborted || got["t2"] != replay.StatusRolledBack {
		t.Errorf("child turns %v", got)
	}
	_, err = Fork(ctx, bus.Bus, src, ForkOptions{AfterTurn: "t2", Thread: "G", Holder: "test"})
	if !errors.Is(err, ErrBadPosition) {
		t.Errorf("fork after a rolled-back turn: %v, want ErrBadPosition", err)
	}
	// The source's writer is untouched: it still holds its lease.
	if err := a.w.Err(); err != nil {
		t.Errorf("the source's writer: %v", err)
	}
	_ = stream.ErrSealed
}
