package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestTurnWithCall: a user turn with a message, a world state, a call and
// its output, ended with the two barriers, replays as one completed user
// turn with its history, world state and settings, and no dangling call.
func TestTurnWithCall(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	c := connect(t, b, "a1")
	th, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "root", Role: "planner", Cwd: "/repo"})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1", Context: agent.TurnContext{Model: "m1", ApprovalPolicy: "never"}, UserText: "build it"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.World(ctx, true, map[string]any{"files": 1}); err != nil {
		t.Fatal(err)
	}
	ran := 0
	out, err := turn.Call(ctx, agent.CallSpec{ID: "c1", Name: "shell", Arguments: `{"cmd":"make"}`, IdempotencyKey: "make-1"},
		func(ctx context.Context) (string, error) {
			ran++
			// The call is on the bus before the effect runs.
			es := entries(t, b, "root")
			last := es[len(es)-1]
			if !strings.Contains(string(last.Payload), `"call_id":"c1"`) {
				t.Errorf("the effect ran before its function_call was flushed; last record %s", last.Payload)
			}
			return "ok", nil
		})
	if err != nil || out != "ok" || ran != 1 {
		t.Fatalf("Call = %q, %v; ran %d", out, err, ran)
	}
	if err := turn.World(ctx, false, map[string]any{"files": 2}); err != nil {
		t.Fatal(err)
	}
	if err := turn.Message(ctx, "assistant", "built"); err != nil {
		t.Fatal(err)
	}
	announced := int64(-1)
	if err := turn.End(ctx, func(ord int64) { announced = ord }); err != nil {
		t.Fatal(err)
	}
	if err := th.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := state(t, b, "root")
	if len(st.Turns) != 1 || st.Turns[0].TurnID != "t1" || st.Turns[0].Status != "completed" || !st.Turns[0].User {
		t.Fatalf("turns = %+v", st.Turns)
	}
	if st.Turns[0].Ordinal != 0 && st.Turns[0].Ordinal > announced {
		t.Errorf("announced ordinal %d before the turn's records", announced)
	}
	es := entries(t, b, "root")
	if es[len(es)-1].Ordinal != announced || es[len(es)-1].EventKind() != rollout.EventTaskComplete {
		t.Errorf("announce got %d; the terminal record is %d %s", announced, es[len(es)-1].Ordinal, es[len(es)-1].EventKind())
	}
	if string(st.WorldState) != `{"files":2}` || st.Model != "m1" || st.AgentRole != "planner" || st.Source != "agent" {
		t.Errorf("state: world %s model %q role %q source %q", st.WorldState, st.Model, st.AgentRole, st.Source)
	}
	if len(st.DanglingCalls) != 0 {
		t.Errorf("dangling calls %+v", st.DanglingCalls)
	}
	if len(st.History) != 4 { // user message, call, output, assistant message
		t.Errorf("history has %d items, want 4", len(st.History))
	}
}

// TestBadUseWritesNothing: every misuse is a typed error and the rollout on
// the bus is exactly as before.
func TestBadUseWritesNothing(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	c := connect(t, b, "a1")
	th, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close(ctx)
	turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1", UserText: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.StartCall(ctx, agent.CallSpec{ID: "c1", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	before := len(entries(t, b, "root"))
	huge := strings.Repeat("x", stream.EmbeddedMaxPayload)
	ran := false
	effect := func(context.Context) (string, error) { ran = true; return "", nil }
	cases := []struct {
		name string
		want error
		do   func() error
	}{
		{"output for an unknown call", agent.ErrUnknownCall, func() error { return turn.Output(ctx, "nope", "x") }},
		{"record over the limit", agent.ErrTooLarge, func() error { return turn.Message(ctx, "assistant", huge) }},
		{"call over the limit", agent.ErrTooLarge, func() error {
			_, err := turn.Call(ctx, agent.CallSpec{Name: "n", Arguments: huge}, effect)
			return err
		}},
		{"invalid call id", agent.ErrInvalidID, func() error { _, err := turn.Call(ctx, agent.CallSpec{ID: "a b", Name: "n"}, effect); return err }},
		{"call id reused", agent.ErrInvalid, func() error { _, err := turn.Call(ctx, agent.CallSpec{ID: "c1", Name: "n"}, effect); return err }},
		{"mail to an invalid id", agent.ErrInvalidID, func() error { _, err := th.Send(ctx, agent.Outgoing{To: "*"}); return err }},
		{"mail of an unknown kind", agent.ErrInvalid, func() error { _, err := th.Send(ctx, agent.Outgoing{To: "x", Kind: "bogus"}); return err }},
		{"spawn with an invalid id", agent.ErrInvalidID, func() error { _, err := th.Spawn(ctx, agent.ThreadSpec{ID: "a.b"}, agent.Task{}); return err }},
		{"second turn", agent.ErrTurnOpen, func() error { _, err := th.BeginTurn(ctx, agent.TurnSpec{}); return err }},
		{"rollback inside a turn", agent.ErrTurnOpen, func() error { return th.Rollback(ctx, 1) }},
		{"retry of a call nobody proved", agent.ErrNotProven, func() error {
			_, err := turn.RetryCall(ctx, "c1", agent.CallSpec{}, effect)
			return err
		}},
		{"a patch that is no object", agent.ErrInvalid, func() error { return turn.World(ctx, false, []int{1}) }},
		{"a response item that is a call", agent.ErrInvalid, func() error {
			return turn.Item(ctx, json.RawMessage(`{"type":"function_call","call_id":"z","name":"n"}`))
		}},
	}
	for _, tc := range cases {
		err := tc.do()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if ran {
		t.Error("an effect ran though its call was refused")
	}
	if err := turn.Output(ctx, "c1", "done"); err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := turn.Message(ctx, "assistant", "late"); !errors.Is(err, agent.ErrNoTurn) {
		t.Errorf("message after End: %v, want ErrNoTurn", err)
	}
	if err := th.Rollback(ctx, 5); err == nil {
		t.Error("rollback of 5 turns with one in effect succeeded")
	}
	if got := len(entries(t, b, "root")); got != before+2 { // the output and task_complete
		t.Errorf("the rollout has %d records, want %d: a refused call wrote something", got, before+2)
	}
	if _, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "root"}); err == nil {
		t.Error("StartRoot of an existing thread succeeded")
	}
}

// TestOpenWhileLeaseLive: a thread another process holds cannot be opened;
// the error names the holder and nothing is written.
func TestOpenWhileLeaseLive(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	a := connect(t, b, "holder")
	th, err := a.StartRoot(ctx, agent.ThreadSpec{ID: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	before := len(entries(t, b, "busy"))
	other := connect(t, b, "intruder")
	_, _, err = other.Open(ctx, "busy", agent.OpenOptions{})
	var held *agent.LeaseHeldError
	if !errors.Is(err, agent.ErrLeaseHeld) || !errors.As(err, &held) || held.Holder != "holder" {
		t.Fatalf("Open of a held thread: %v", err)
	}
	if got := len(entries(t, b, "busy")); got != before {
		t.Errorf("a refused Open wrote %d records", got-before)
	}
	if err := th.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Open(ctx, "busy", agent.OpenOptions{}); err != nil {
		t.Errorf("Open after Close: %v", err)
	}
}

// prober answers every call question with one outcome.
type prober struct {
	outcome string
	asked   []agent.Question
}

func (p *prober) Probe(_ context.Context, q agent.Question) (agent.Answer, error) {
	p.asked = append(p.asked, q)
	if q.CallID == "" {
		return agent.Answer{}, agent.ErrNotAsked
	}
	return agent.Answer{Outcome: p.outcome, By: "probe:test", Evidence: "looked it up"}, nil
}

// crashMidEffect starts a turn and a call on a thread of its own client,
// then drops the connection without releasing anything (the process died
// during the effect) and waits out the lease.
func crashMidEffect(t *testing.T, ctx context.Context, c *agent.Client, thread string) {
	t.Helper()
	th, err := c.StartRoot(ctx, agent.ThreadSpec{ID: thread})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1", UserText: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.StartCall(ctx, agent.CallSpec{ID: "pay1", Name: "pay", Arguments: `{"eur":5}`, IdempotencyKey: "order-7"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	time.Sleep(c.LeaseTTL() + 200*time.Millisecond)
}

// TestCrashDuringEffectIsNeverRerun: after a crash during an effect, Open
// aborts the stale turn and reports the call unknown; the package runs
// nothing, and RetryCall refuses a call no probe proved unexecuted.
func TestCrashDuringEffectIsNeverRerun(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	crashMidEffect(t, ctx, connect(t, b, "dead"), "payer")

	c := connect(t, b, "heir")
	th, res, err := c.Open(ctx, "payer", agent.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted != "t1" || len(res.Unknown) != 1 || res.Unknown[0].CallID != "pay1" || res.Unknown[0].IdempotencyKey != "order-7" {
		t.Fatalf("resumed: aborted %q unknown %+v", res.Aborted, res.Unknown)
	}
	turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t2", UserText: "again"})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if _, err := turn.RetryCall(ctx, "pay1", agent.CallSpec{}, func(context.Context) (string, error) { ran = true; return "", nil }); !errors.Is(err, agent.ErrNotProven) || ran {
		t.Fatalf("RetryCall of an unknown call: %v (ran %v)", err, ran)
	}
	if err := turn.Output(ctx, "pay1", "paid"); !errors.Is(err, agent.ErrUnknownCall) {
		t.Errorf("Output for the crashed process's call: %v, want ErrUnknownCall", err)
	}
	if err := turn.Compact(ctx, "summary", nil); err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := th.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := state(t, b, "payer")
	if len(st.DanglingCalls) != 1 || st.DanglingCalls[0].CallID != "pay1" {
		t.Errorf("after a checkpoint the call should still be dangling: %+v", st.DanglingCalls)
	}
	if st.Turns[0].Status != "aborted" && len(st.Turns) > 1 && st.Turns[0].TurnID == "t1" {
		t.Errorf("stale turn: %+v", st.Turns[0])
	}
}

// TestRetryOnlyWhatWasProven: a Prober's not_executed answer is recorded
// and only then may the caller retry the call, under its idempotency key.
func TestRetryOnlyWhatWasProven(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	crashMidEffect(t, ctx, connect(t, b, "dead"), "payer")

	c := connect(t, b, "heir")
	p := &prober{outcome: agent.NotExecuted}
	th, res, err := c.Open(ctx, "payer", agent.OpenOptions{Prober: p})
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close(ctx)
	if len(p.asked) != 1 || p.asked[0].IdempotencyKey != "order-7" || len(res.Findings) != 1 || len(res.Unknown) != 0 {
		t.Fatalf("asked %+v findings %+v unknown %+v", p.asked, res.Findings, res.Unknown)
	}
	turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t2", UserText: "again"})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	out, err := turn.RetryCall(ctx, "pay1", agent.CallSpec{ID: "pay2", Arguments: `{"eur":5}`}, func(context.Context) (string, error) { ran++; return "paid", nil })
	if err != nil || out != "paid" || ran != 1 {
		t.Fatalf("RetryCall = %q, %v (ran %d)", out, err, ran)
	}
	if _, err := turn.RetryCall(ctx, "pay1", agent.CallSpec{}, func(context.Context) (string, error) { ran++; return "", nil }); !errors.Is(err, agent.ErrNotProven) || ran != 1 {
		t.Errorf("a second retry of the same call: %v (ran %d)", err, ran)
	}
	if err := turn.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var retried bool
	for _, e := range entries(t, b, "payer") {
		if strings.Contains(string(e.Payload), `"call_id":"pay2"`) && strings.Contains(string(e.Payload), `"idempotency_key":"order-7"`) {
			retried = true
		}
	}
	if !retried {
		t.Error("the retry was not logged under the original idempotency key")
	}
}

// TestOutcomeUnknownLeavesTheCallOpen: an effect that cannot tell what
// happened logs no output; the call is open in a checkpoint's open_calls.
func TestOutcomeUnknownLeavesTheCallOpen(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	c := connect(t, b, "a")
	th, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close(ctx)
	turn, _ := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1", UserText: "x"})
	_, err = turn.Call(ctx, agent.CallSpec{ID: "c1", Name: "deploy", IdempotencyKey: "rel-3"}, func(context.Context) (string, error) {
		return "", agent.ErrOutcomeUnknown
	})
	if !errors.Is(err, agent.ErrOutcomeUnknown) {
		t.Fatalf("Call: %v", err)
	}
	if err := turn.Compact(ctx, "s", []json.RawMessage{rollout.MessageItem("user", "x")}); err != nil {
		t.Fatal(err)
	}
	es := entries(t, b, "w")
	cp, err := rollout.Decode[rollout.Compacted](&es[len(es)-1].Record)
	if err != nil || cp.OpenCalls == nil || len(*cp.OpenCalls) != 1 || (*cp.OpenCalls)[0].CallID != "c1" || (*cp.OpenCalls)[0].TurnID != "t1" {
		t.Fatalf("checkpoint open_calls: %+v, %v", cp.OpenCalls, err)
	}
	if st := state(t, b, "w"); len(st.DanglingCalls) != 1 || len(st.History) != 1 {
		t.Errorf("after the checkpoint: dangling %+v, history %d items (want the replacement's one)", st.DanglingCalls, len(st.History))
	}
}

// TestFencedAfterTakeover: once another writer forcibly takes the lease
// and writes, the old Thread fails with a typed error and none of its later
// records reach the rollout.
func TestFencedAfterTakeover(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	c := connect(t, b, "old")
	th, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "f", RolloutID: "rf"})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1", UserText: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, nil); err != nil {
		t.Fatal(err)
	}
	other := b.Connect(t)
	lease, err := other.TakeLease(ctx, "f", stream.LeaseOptions{Holder: "operator", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	w, err := other.OpenWriter(ctx, lease, "rf", stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb := rollout.Builder{Next: w.Next()}
	if _, err := w.Append(ctx, rb.Message("developer", "taken over")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var werr error
	for range 50 { // the old writer learns of the takeover at its next publish or renewal
		turn, err := th.BeginTurn(ctx, agent.TurnSpec{UserText: "late"})
		if err == nil {
			err = turn.End(ctx, nil)
		}
		if err != nil {
			werr = err
			break
		}
	}
	if !errors.Is(werr, agent.ErrFenced) && !errors.Is(werr, agent.ErrLeaseLost) {
		t.Fatalf("old writer after a takeover: %v, want ErrFenced or ErrLeaseLost", werr)
	}
	es := entries(t, b, "f")
	if last := es[len(es)-1]; !strings.Contains(string(last.Payload), "taken over") {
		t.Errorf("the old writer's record landed after the takeover: %s", last.Payload)
	}
	if err := th.Close(ctx); err == nil {
		t.Log("Close after fencing reported no error")
	}
}

// TestSpawnTaskAndResult: a parent spawns a child with a task; a worker
// opens the child, receives the task and replies; the child's result is
// unconfirmed until the parent receives it, then confirmed; the lineage
// tree links them.
func TestSpawnTaskAndResult(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	pc := connect(t, b, "parent-proc")
	root, err := pc.StartRoot(ctx, agent.ThreadSpec{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close(ctx)
	child, err := root.Spawn(ctx, agent.ThreadSpec{ID: "kid", Role: "build"}, agent.Task{Body: map[string]string{"do": "compile"}})
	if err != nil {
		t.Fatal(err)
	}
	wc := connect(t, b, "worker")
	kid, res, err := wc.Open(ctx, child.ID, agent.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.State.ParentThreadID != "root" || res.State.AgentRole != "build" {
		t.Errorf("child state: parent %q role %q", res.State.ParentThreadID, res.State.AgentRole)
	}
	mail, err := kid.Receive(ctx, 10, 2*time.Second)
	if err != nil || len(mail) != 1 || mail[0].MsgID != child.TaskMsgID || mail[0].Kind != agent.KindTask || string(mail[0].Body) != `{"do":"compile"}` || mail[0].From != "root" {
		t.Fatalf("child received %+v, %v", mail, err)
	}
	resultID, err := kid.Reply(ctx, mail[0], "compiled")
	if err != nil {
		t.Fatal(err)
	}
	if err := kid.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A closed thread holds no mailbox consumer: the server allows 1,000 per stream.
	js, _ := jetstream.New(b.Conn)
	if _, err := js.Consumer(ctx, stream.StreamMail, stream.MailConsumerName("kid")); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("the child's mailbox consumer outlived its Close: %v", err)
	}
	result := func() string {
		for _, r := range lineage(t, b, "root", "kid").ChildResults {
			if r.Child == "kid" && r.TaskMsgID == child.TaskMsgID {
				return r.State
			}
		}
		return "missing"
	}
	if got := result(); got != dedupe.Unconfirmed {
		t.Errorf("child result before the parent received it: %s, want unconfirmed", got)
	}
	got, err := root.Receive(ctx, 10, 2*time.Second)
	if err != nil || len(got) != 1 || got[0].MsgID != resultID || got[0].InReplyTo != child.TaskMsgID {
		t.Fatalf("parent received %+v, %v", got, err)
	}
	if err := root.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := result(); got != "missing" {
		t.Errorf("child result after the parent received it is still listed: %s", got)
	}
	tr := lineage(t, b, "root", "kid")
	for _, d := range tr.Deliveries {
		if d.State != dedupe.Confirmed {
			t.Errorf("delivery %s (%s) is %s, want confirmed", d.MsgID, d.Kind, d.State)
		}
	}
	if len(tr.Deliveries) != 2 {
		t.Errorf("%d deliveries, want the task and the result", len(tr.Deliveries))
	}
	if len(tr.Roots) != 1 || tr.Roots[0].ThreadID != "root" || len(tr.Roots[0].Children) != 1 || tr.Roots[0].Children[0].ThreadID != "kid" {
		t.Errorf("lineage: %+v", tr.Roots)
	}
}
