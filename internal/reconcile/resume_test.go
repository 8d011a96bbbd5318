package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
	"github.com/logbook-agents/logbook/internal/tree"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// TestResumeAfterACrash: a parent killed mid-turn with a deploy in flight, a
// task logged but never published, and a task published but not yet taken.
// Resume waits for the dead writer's lease, aborts the stale turn, asks the
// prober about the keyed call, finds out from MAIL which send was published,
// records every answer, and re-sends only the one proven never published.
func TestResumeAfterACrash(t *testing.T) {
	tb := streamtest.New(t, streamtest.Options{LeaseTTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The parent, in its own connection: closing it is the crash.
	bus, nc := tb.ConnectConn(t)
	lease, err := bus.TakeLease(ctx, "P", stream.LeaseOptions{Holder: "agent-P"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.OpenWriter(ctx, lease, "rP", stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Threads().Create(ctx, "P", []byte("rP")); err != nil {
		t.Fatal(err)
	}
	b := rollout.Builder{}
	for _, r := range []rollout.Record{
		b.Meta(rollout.SessionMeta{ID: "P", RolloutID: "rP", Cwd: "/repo", Source: rollout.Source{Kind: "sim"}}),
		b.TaskStarted("t1"), b.UserMessage("deploy and delegate"),
		b.TurnContext(rollout.TurnContext{TurnID: "t1", Model: "model-large", ApprovalPolicy: "on-request"}),
		b.Call("call-deploy", "deploy", `{"version":"1.4.2"}`, "deploy-1.4.2"),
		b.Call("call-shell", "shell", `{"cmd":"ls"}`, ""),
	} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// m-lost: logged and flushed, the process dies before publishing.
	lost := rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: "m-lost", IdempotencyKey: "k-lost", ToThread: "C1", Kind: rollout.MsgTask}
	if _, err := w.Append(ctx, rollout.Record{Type: rollout.TypeEventMsg, Payload: rollout.MustJSON(lost)}); err != nil {
		t.Fatal(err)
	}
	// m-sent: logged, flushed and published; C2 has not taken it yet.
	if _, err := dedupe.SendMail(ctx, w, bus, "P", rollout.InterAgentSent{MsgID: "m-sent", IdempotencyKey: "k-sent", ToThread: "C2", Kind: rollout.MsgTask}); err != nil {
		t.Fatal(err)
	}
	nc.Close() // SIGKILL, as far as the bus can tell

	pr := &Scripted{Answers: map[string]Answer{"deploy-1.4.2": {Outcome: rollout.OutcomeExecuted, Evidence: "1.4.2 is live"}}}
	deliveries := func(ctx context.Context) ([]dedupe.Delivery, error) {
		c, err := ops.CorpusFromBus(ctx, tb.Bus, "P", "C1", "C2")
		if err != nil {
			return nil, err
		}
		return tree.Build(c, tree.Options{}).Deliveries, nil
	}
	opt := ResumeOptions{Holder: "coordinator", Prober: pr, RetryProvenNotExecuted: true, Deliveries: deliveries}
	var rep *ResumeReport
	deadline := time.Now().Add(15 * time.Second)
	for {
		rep, err = Resume(ctx, tb.Bus, "P", opt)
		if !errors.Is(err, ErrActive) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead writer's lease never expired")
		}
		time.Sleep(100 * time.Millisecond) // the lease expires on the server's clock
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Aborted != "t1" {
		t.Errorf("aborted %q, want t1", rep.Aborted)
	}
	got := map[string]string{}
	for _, f := range rep.Findings {
		got[f.Question.CallID+f.Question.MsgID] = f.Answer.Outcome
	}
	want := map[string]string{"call-deploy": rollout.OutcomeExecuted, "m-lost": rollout.OutcomeNotExecuted, "m-sent": rollout.OutcomeExecuted}
	if len(got) != len(want) {
		t.Errorf("findings %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if len(rep.Resent) != 1 || rep.Resent[0] != "m-lost" {
		t.Errorf("re-sent %v, want [m-lost]", rep.Resent)
	}
	if pending, _ := tb.MailPending(ctx, "C1", "m-lost"); !pending {
		t.Error("m-lost is not on MAIL after the re-send")
	}
	// The replayed state: the turn aborted, the deploy reconciled, the shell
	// call still unknown (no key: nothing to probe), never retried.
	st := rep.State
	if s := st.Turns[len(st.Turns)-1]; s.Status != replay.StatusAborted || s.Reason != rollout.AbortStaleAfterCrash {
		t.Errorf("last turn %+v", s)
	}
	if len(st.DanglingCalls) != 1 || st.DanglingCalls[0].CallID != "call-shell" {
		t.Errorf("dangling calls %+v", st.DanglingCalls)
	}
	// A second resume has nothing left to do.
	again, err := Resume(ctx, tb.Bus, "P", ResumeOptions{Holder: "coordinator", Prober: pr, Deliveries: deliveries})
	if err != nil {
		t.Fatal(err)
	}
	if again.Aborted != "" || len(again.Resent) != 0 {
		t.Errorf("second resume: %+v", again)
	}
}

// crashedThread writes thread th (rollout r) with a turn that never ended
// and a keyed deploy call with no output, then releases the lease.
func crashedThread(t *testing.T, bus *stream.Bus, th, r string) {
	t.Helper()
	ctx := context.Background()
	lease, err := bus.TakeLease(ctx, th, stream.LeaseOptions{Holder: "agent-" + th})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.OpenWriter(ctx, lease, r, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Threads().Create(ctx, th, []byte(r)); err != nil {
		t.Fatal(err)
	}
	b := rollout.Builder{}
	for _, rec := range []rollout.Record{
		b.Meta(rollout.SessionMeta{ID: th, RolloutID: r, Cwd: "/repo", Source: rollout.Source{Kind: "sim"}}),
		b.TaskStarted("t1"), b.UserMessage("deploy"),
		b.Call("call-deploy", "deploy", `{"version":"1.4.2"}`, "deploy-1.4.2"),
	} {
		if _, err := w.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func lastOrdinal(t *testing.T, bus *stream.Bus, r string) int64 {
	t.Helper()
	tail, _, _, err := bus.ValidTail(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return tail.Ordinal
}

// TestResumeRecordsOnlyNews: nobody asked is no answer (nothing recorded,
// the call stays unknown), and a resume that learns nothing new appends
// nothing: the second and third runs leave the rollout as it was.
func TestResumeRecordsOnlyNews(t *testing.T) {
	tb := streamtest.New(t, streamtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	crashedThread(t, tb.Bus, "N", "rN")
	before := lastOrdinal(t, tb.Bus, "rN")
	for _, pr := range []Prober{nil, &Terminal{Who: "ops"}} { // no prober; no terminal
		rep, err := Resume(ctx, tb.Bus, "N", ResumeOptions{Holder: "coordinator", Prober: pr})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Findings) != 0 || len(rep.Recorded) != 0 {
			t.Errorf("%T: findings %+v: nobody was asked", pr, rep.Findings)
		}
		if len(rep.State.DanglingCalls) != 1 {
			t.Errorf("%T: dangling %+v, want call-deploy still unknown", pr, rep.State.DanglingCalls)
		}
	}
	after := lastOrdinal(t, tb.Bus, "rN")
	if after != before+1 { // the stale turn's abort, once
		t.Errorf("rollout went from ordinal %d to %d, want %d (one turn_aborted)", before, after, before+1)
	}
	// An answer of unknown is recorded once; the same answer again is old news.
	pr := &Scripted{}
	for i := range 2 {
		rep, err := Resume(ctx, tb.Bus, "N", ResumeOptions{Holder: "coordinator", Prober: pr})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Findings) != 1 || len(rep.Recorded) != 1-i || rep.Appended != 1-i {
			t.Errorf("run %d: findings %d, recorded %d, appended %d", i, len(rep.Findings), len(rep.Recorded), rep.Appended)
		}
	}
	if got := lastOrdinal(t, tb.Bus, "rN"); got != after+1 {
		t.Errorf("ordinal %d, want %d: one reconciled{unknown}", got, after+1)
	}
}

// TestNoteRefusesWhatIsNotOpen: a reconciled record about a call or message
// that is not open in the thread is refused, naming the open ones, and
// nothing is appended.
func TestNoteRefusesWhatIsNotOpen(t *testing.T) {
	tb := streamtest.New(t, streamtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	crashedThread(t, tb.Bus, "N", "rN")
	before := lastOrdinal(t, tb.Bus, "rN")
	rec := rollout.Reconciled{CallID: "nope", Outcome: rollout.OutcomeExecuted, Evidence: "x", By: "person:ops"}
	if _, err := Note(ctx, tb.Bus, "N", "test", rec, nil); err == nil || !strings.Contains(err.Error(), "call nope is not open in thread N (open: call-deploy)") {
		t.Errorf("unknown call: %v", err)
	}
	rec = rollout.Reconciled{MsgID: "m-nope", Outcome: rollout.OutcomeExecuted, Evidence: "x", By: "person:ops"}
	if _, err := Note(ctx, tb.Bus, "N", "test", rec, nil); err == nil || !strings.Contains(err.Error(), "message m-nope is not open in thread N (no message is open there)") {
		t.Errorf("unknown message: %v", err)
	}
	if got := lastOrdinal(t, tb.Bus, "rN"); got != before {
		t.Fatalf("a refused note appended: ordinal %d, want %d", got, before)
	}
	rec = rollout.Reconciled{CallID: "call-deploy", Outcome: rollout.OutcomeExecuted, Evidence: "1.4.2 is live", By: "person:ops"}
	if ord, err := Note(ctx, tb.Bus, "N", "test", rec, nil); err != nil || ord != before+1 {
		t.Fatalf("open call: ordinal %d, %v", ord, err)
	}
	// Reconciled: no longer open.
	if _, err := Note(ctx, tb.Bus, "N", "test", rec, nil); err == nil || !strings.Contains(err.Error(), "no call is open there") {
		t.Errorf("a resolved call: %v", err)
	}
}
