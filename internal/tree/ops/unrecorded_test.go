package ops

import (
	"errors"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestForkFinishesAnInterruptedFork: a fork whose process died after its
// records were flushed and before THREADS was written is finished by the
// same fork again: THREADS names the one rollout, nothing is written
// twice. A fork from another point into that id is refused.
func TestForkFinishesAnInterruptedFork(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	a := newAgent(t, bus.Bus, "P", "rP", rollout.HistoryLegacy).turn("t1", true).turn("t2", true).turn("t3", true)
	a.flush()
	src, err := Load(ctx, bus.Bus, "P")
	if err != nil {
		t.Fatal(err)
	}
	first, err := Fork(ctx, bus.Bus, src, ForkOptions{AfterTurn: "t2", Thread: "F", Holder: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Rollout != "F" {
		t.Errorf("fork rollout %s, want the thread id F by default", first.Rollout)
	}
	records := func() int {
		es, err := bus.Bus.ReadAll(ctx, "F", 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	n := records()
	if err := bus.Bus.Threads().Delete(ctx, "F"); err != nil { // the crash: THREADS never written
		t.Fatal(err)
	}
	if _, err := Fork(ctx, bus.Bus, src, ForkOptions{AfterTurn: "t1", Thread: "F", Holder: "test"}); !errors.Is(err, ErrOtherCreate) {
		t.Fatalf("a fork from another point into the interrupted fork's id: %v, want ErrOtherCreate", err)
	}
	again, err := Fork(ctx, bus.Bus, src, ForkOptions{AfterTurn: "t2", Thread: "F", Holder: "test"})
	if err != nil {
		t.Fatalf("the fork again: %v", err)
	}
	if got := records(); got != n {
		t.Errorf("the fork again left %d records, the first wrote %d", got, n)
	}
	if e, err := bus.Bus.Threads().Get(ctx, "F"); err != nil || string(e.Value()) != "F" {
		t.Fatalf("THREADS F: %v", err)
	}
	if !equal(texts(again.State), texts(first.State)) {
		t.Errorf("history %v, want %v", texts(again.State), texts(first.State))
	}
}

// TestUnrecordedFinish: an interrupted create's records are a prefix of
// the create's (the rest is written), or the create is refused naming why.
func TestUnrecordedFinish(t *testing.T) {
	b := &rollout.Builder{}
	meta := rollout.SessionMeta{ID: "T", RolloutID: "T", ForkedFromID: "P", Source: rollout.Source{Kind: "fork"}}
	recs := []rollout.Record{b.Meta(meta), b.TaskStarted("t1"), b.TaskComplete("t1")}
	u := &Unrecorded{Rollout: "T", Records: recs[:2]}
	rest, err := u.Finish(recs)
	if err != nil || len(rest) != 1 || rest[0].Ordinal != 3 {
		t.Fatalf("prefix of 2: rest %d records, %v", len(rest), err)
	}
	other := meta
	other.ForkedFromID = "Q"
	for name, c := range map[string]struct {
		have []rollout.Record
		want string
	}{
		"another parent":  {[]rollout.Record{(&rollout.Builder{}).Meta(other)}, `"forked_from_id":"Q"`},
		"longer":          {append(recs[:3:3], b.TaskStarted("t2")), "holds 4 records"},
		"another record":  {[]rollout.Record{recs[0], recs[2]}, "ordinal 2 is another record"},
		"no session_meta": {[]rollout.Record{recs[1]}, "not a session_meta"},
	} {
		_, err := (&Unrecorded{Rollout: "T", Records: c.have}).Finish(recs)
		if !errors.Is(err, ErrOtherCreate) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrOtherCreate with %q", name, err, c.want)
		}
	}
}
