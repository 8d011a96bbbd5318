package agent_test

import (
	"fmt"
	"testing"

	"github.com/logbook-agents/logbook/agent"
)

// TestOpenReadsTheRolloutTwiceAtMost: opening a thread of many packs reads
// its rollout from the bus once for the resume's view and once for its
// deliveries; the writer continues at the tail the view read instead of
// reading the rollout a third time.
func TestOpenReadsTheRolloutTwiceAtMost(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	a := connect(t, b, "first")
	th, err := a.StartRoot(ctx, agent.ThreadSpec{ID: "long"})
	if err != nil {
		t.Fatal(err)
	}
	const turns = 40
	for i := range turns {
		turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: fmt.Sprintf("t%d", i), UserText: "go on"})
		if err != nil {
			t.Fatal(err)
		}
		if err := turn.End(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := th.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c := connect(t, b, "second")
	before := c.RolloutGets()
	reopened, _, err := c.Open(ctx, "long", agent.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gets := c.RolloutGets() - before
	before = c.RolloutGets()
	if _, err := reopened.State(ctx); err != nil { // one whole read
		t.Fatal(err)
	}
	once := c.RolloutGets() - before
	t.Logf("one read of the rollout: %d message gets; Open: %d", once, gets)
	if once < turns || gets > 2*once+4 {
		t.Errorf("Open made %d message gets, one read of the rollout %d: it was read more than twice", gets, once)
	}
	// The writer opened at that tail works.
	turn, err := reopened.BeginTurn(ctx, agent.TurnSpec{ID: "after", UserText: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := reopened.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
