package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRecoveryDeployInFlight is the chapter's section 10.13 with live
// agents: a worker is SIGKILLed with a side-effecting call in flight (crash
// point after_effect: the world carried the effect out, its output is not
// logged). The simulator's keyed call ("apply", on the world) stands for the
// story's deploy. While no worker runs the thread, the data dir shows what
// a person would see: the turn interrupted, the call dangling (unknown), the
// thread's result unconfirmed at its parent; the world's ledger shows the
// effect executed once. Another worker then resumes the thread: after
// recovery the turn is aborted (stale_after_crash), the call is settled by
// a reconciled record from the world's probe (executed), its output was
// never logged and it was never called again, the world executed it once,
// and the tree completes as the ground truth says.
func TestRecoveryDeployInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	b := startSimBus(t, "2s")
	crasher := b.worker(t, "crasher", "--crash", "after_effect")
	run := b.startRun(t, "--seed", "5", "--agents", "6", "--depth", "1", "--turns", "3")
	if !poll(60*time.Second, func() bool { return crasher.exited() || run.finished() }) || !crasher.exited() {
		t.Fatalf("the crashing worker never reached its crash point\n%s", crasher.stderr)
	}
	if !crasher.killedBySignal() || !strings.Contains(crasher.stderr.String(), "point=after_effect") {
		t.Fatalf("the crasher exited otherwise: %v\n%s", crasher.err, crasher.stderr)
	}

	// Broken: no worker runs the thread. Find the call in flight: dangling
	// in the mirror, executed in the world's ledger.
	var thread string
	var call shownCall
	var broken shownState
	var last string
	if !poll(30*time.Second, func() bool {
		nodes, err := b.nodes(t)
		if err != nil {
			last = err.Error()
			return false
		}
		ledger := mustLedger(t, b.ledger)
		for id, n := range nodes {
			if n.Counts.UnknownCalls == 0 {
				continue
			}
			s, err := b.show(t, id)
			if err != nil {
				last = err.Error()
				return false
			}
			for _, c := range s.DanglingCalls {
				if e, ok := ledger[c.IdempotencyKey]; ok && e.Executions > 0 {
					thread, call, broken = id, c, s
					return true
				}
			}
		}
		last = fmt.Sprintf("no dangling call the world executed among %d threads", len(nodes))
		return false
	}) {
		t.Fatalf("the mirror never showed the call in flight: %s", last)
	}
	t.Logf("in flight: thread %s, call %s (%s, key %s) in turn %s", thread, call.CallID, call.Name, call.IdempotencyKey, call.TurnID)
	if st, _ := broken.turn(call.TurnID); st != "interrupted" {
		t.Errorf("while broken, show %s: turn %s is %q, want interrupted\n%+v", thread, call.TurnID, st, broken.Turns)
	}
	if call.Name != "apply" || call.IdempotencyKey == "" {
		t.Errorf("the call in flight: %+v, want the keyed side effect", call)
	}
	// The tree shows the thread active while the dead worker's lease
	// lives, then needing attention.
	var n treeNode
	if !poll(10*time.Second, func() bool { n = mustNodes(t, b)[thread]; return n.Status != "active" }) ||
		n.Status != "needs_attention" || n.Counts.InterruptedTurns != 1 || n.Counts.UnknownCalls < 1 {
		t.Errorf("while broken, tree: %s is %s %+v, want needs_attention with an interrupted turn and an unknown call", thread, n.Status, n.Counts)
	}
	results, err := b.unconfirmedResults(t)
	if err != nil {
		t.Fatal(err)
	}
	if !hasChildResult(results, thread, "no_result") {
		t.Errorf("while broken, unconfirmed does not list %s's result as missing: %+v", thread, results)
	}
	if e := mustLedger(t, b.ledger)[call.IdempotencyKey]; e.Executions != 1 || e.Requests != 1 {
		t.Errorf("while broken, the world's ledger: %+v, want executed once, asked once", e)
	}
	if got := callRecords(b.mirrorRecords(t, broken.RolloutID), call); got != "function_call" {
		t.Errorf("while broken, the mirror holds for call %s: %s; want only its function_call", call.CallID, got)
	}

	// Recovery: another worker takes the thread over once its lease expires.
	b.worker(t, "heir")
	s := run.wait(t, b)
	if s.ExecutedTwice != 0 || s.Rerequested != 0 || s.Threads != s.Planned {
		t.Fatalf("summary %+v", s)
	}
	b.checkAgainstTruth(t, s)

	after, err := b.show(t, thread)
	if err != nil {
		t.Fatal(err)
	}
	if st, reason := after.turn(call.TurnID); st != "aborted" || reason != "stale_after_crash" {
		t.Errorf("after recovery, show %s: turn %s is %q (%q), want aborted (stale_after_crash)\n%+v", thread, call.TurnID, st, reason, after.Turns)
	}
	if len(after.DanglingCalls) != 0 {
		t.Errorf("after recovery, show %s still lists unknown calls: %+v", thread, after.DanglingCalls)
	}
	recs := b.mirrorRecords(t, after.RolloutID)
	if got := callRecords(recs, call); got != "function_call reconciled:executed:probe:world" {
		t.Errorf("after recovery, the mirror holds for call %s: %s; want its function_call, then the world's probe's reconciled executed (no output, no second call)", call.CallID, got)
	}
	for _, r := range recs {
		if r.Payload.Type == "function_call" && r.Payload.IdempotencyKey == call.IdempotencyKey && r.Payload.CallID != call.CallID {
			t.Errorf("after recovery, %s was called again (call %s at #%d)", call.IdempotencyKey, r.Payload.CallID, r.Ordinal)
		}
	}
	if e := mustLedger(t, b.ledger)[call.IdempotencyKey]; e.Executions != 1 || e.Requests != 1 {
		t.Errorf("after recovery, the world's ledger: %+v, want executed once, asked once (deployed once)", e)
	}
	if n := mustNodes(t, b)[thread]; n.Status != "idle" {
		t.Errorf("after recovery, tree: %s is %s %+v, want idle", thread, n.Status, n.Counts)
	}
}

// callRecords lists what a rollout's records say about a call, in order:
// function_call, function_call_output, reconciled:OUTCOME:BY.
func callRecords(recs []mirrorRecord, c shownCall) string {
	var got []string
	for _, r := range recs {
		if r.Payload.CallID != c.CallID {
			continue
		}
		switch r.Payload.Type {
		case "reconciled":
			got = append(got, "reconciled:"+r.Payload.Outcome+":"+r.Payload.By)
		default:
			got = append(got, r.Payload.Type)
		}
	}
	return strings.Join(got, " ")
}

func hasChildResult(rs []childResult, child, state string) bool {
	for _, r := range rs {
		if r.Child == child && r.State == state {
			return true
		}
	}
	return false
}

func mustNodes(t testing.TB, b *simBus) map[string]treeNode {
	t.Helper()
	n, err := b.nodes(t)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
