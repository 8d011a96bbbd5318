package ops

import (
	"testing"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestThreadDeliveries: P sends a task to A (received: A's receipt is in
// A's rollout) and to B (never received), and logged a result from A; C
// and D exchange mail P has nothing to do with. P's deliveries come from
// the bus with its peers' views, A's receipt confirming its task: the
// three of P's, none of C's and D's.
func TestThreadDeliveries(t *testing.T) {
	bus := newBus(t)
	sent := func(id, to string) rollout.Record {
		var b rollout.Builder
		return b.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: id, IdempotencyKey: id, ToThread: to, Kind: rollout.MsgTask})
	}
	recv := func(id, from string) rollout.Record {
		var b rollout.Builder
		return b.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: id, IdempotencyKey: id, FromThread: from, Kind: rollout.MsgTask})
	}
	newAgent(t, bus.Bus, "P", "rP", "").add(sent("m-a", "A"), sent("m-b", "B"), recv("m-res", "A")).stop()
	newAgent(t, bus.Bus, "A", "rA", "").add(recv("m-a", "P"), sent("m-res", "P")).stop()
	newAgent(t, bus.Bus, "C", "rC", "").add(sent("m-cd", "D")).stop()
	newAgent(t, bus.Bus, "D", "rD", "").add(recv("m-cd", "C")).stop()

	got, err := ThreadDeliveries(ctxT(t), bus.Bus, "P")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"m-a": dedupe.Confirmed, "m-b": dedupe.Unconfirmed, "m-res": dedupe.Confirmed}
	if len(got) != len(want) {
		t.Fatalf("%d deliveries, want %d: %+v", len(got), len(want), got)
	}
	for _, d := range got {
		if want[d.MsgID] != d.State || (d.FromThread != "P" && d.ToThread != "P") {
			t.Errorf("delivery %s from %s to %s is %s, want %q", d.MsgID, d.FromThread, d.ToThread, d.State, want[d.MsgID])
		}
	}
	if got, err := ThreadDeliveries(ctxT(t), bus.Bus, "nobody"); err != nil || len(got) != 0 {
		t.Errorf("a thread the bus does not know: %v, %v", got, err)
	}
}
