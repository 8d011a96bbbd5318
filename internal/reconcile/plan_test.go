package reconcile

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

type fakeMail map[string]bool

func (m fakeMail) Pending(_ context.Context, _, msgID string) (bool, error) { return m[msgID], nil }

func (m fakeMail) Received(context.Context, string, string) (bool, error) { return false, nil }

func TestDecideAndProbe(t *testing.T) {
	st := &replay.State{
		Turns: []replay.Turn{{TurnID: "t1", Status: replay.StatusCompleted}, {TurnID: "t2", Status: replay.StatusInterrupted}},
		DanglingCalls: []replay.Call{
			{CallID: "c1", Name: "deploy", IdempotencyKey: "deploy-1", TurnID: "t2"},
			{CallID: "c2", Name: "shell", TurnID: "t2"}, // no key: listed, not probed
			{CallID: "c3", Name: "email", IdempotencyKey: "mail-7", TurnID: "t1"},
		},
	}
	deliveries := []dedupe.Delivery{
		{MsgID: "m1", FromThread: "P", ToThread: "C", Kind: rollout.MsgTask, State: dedupe.Unconfirmed},
		{MsgID: "m2", FromThread: "P", ToThread: "D", Kind: rollout.MsgTask, State: dedupe.Unconfirmed},
		{MsgID: "m3", FromThread: "P", ToThread: "E", Kind: rollout.MsgTask, State: dedupe.Confirmed},
		{MsgID: "m4", FromThread: "X", ToThread: "P", Kind: rollout.MsgResult, State: dedupe.Unconfirmed},
	}
	p, err := Decide("P", st, deliveries)
	if err != nil {
		t.Fatal(err)
	}
	if p.StaleTurn == nil || p.StaleTurn.TurnID != "t2" {
		t.Errorf("stale turn %+v, want t2", p.StaleTurn)
	}
	if len(p.Unknown) != 3 || len(p.Sends) != 2 {
		t.Fatalf("plan: %d unknown calls, %d sends", len(p.Unknown), len(p.Sends))
	}
	pr := &Scripted{Answers: map[string]Answer{"deploy-1": {Outcome: rollout.OutcomeExecuted, Evidence: "version 1.4.2 is live"}}}
	found, err := p.Probe(context.Background(), pr, fakeMail{"m1": true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range found {
		got[f.Question.CallID+f.Question.MsgID] = f.Answer.Outcome
		if r := f.Record(); r.Type != rollout.EventReconciled || r.By == "" || r.Evidence == "" {
			t.Errorf("record %+v", r)
		}
	}
	want := map[string]string{"c1": rollout.OutcomeExecuted, "c3": rollout.OutcomeUnknown,
		"m1": rollout.OutcomeExecuted, "m2": rollout.OutcomeNotExecuted}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if _, asked := got["c2"]; asked {
		t.Error("a call without an idempotency key was probed")
	}
	if len(pr.Asked) != 2 {
		t.Errorf("the prober was asked %d questions, want 2 (the MAIL search answers sends)", len(pr.Asked))
	}
}

func TestDecideRefusesReadOnly(t *testing.T) {
	if _, err := Decide("T", &replay.State{ReadOnly: true}, nil); err == nil {
		t.Fatal("a rollout from a newer schema was planned for resume")
	}
}

// TestTerminalWithoutATerminal: no terminal, no blocking, and no answer: a
// person who was never asked is not credited with "unknown".
func TestTerminalWithoutATerminal(t *testing.T) {
	r, w := io.Pipe() // never written: reading would block forever
	defer w.Close()
	tp := &Terminal{In: r, Out: io.Discard, Who: "ops"}
	done := make(chan error, 1)
	go func() {
		a, err := tp.Probe(context.Background(), Question{CallID: "c1"})
		if err == nil {
			t.Errorf("answer %+v without a terminal", a)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotAsked) {
			t.Errorf("err %v, want ErrNotAsked", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the terminal prober blocked without a terminal")
	}
	// A plan probed with it has no finding for the keyed call.
	p := &Plan{Thread: "T", Unknown: []replay.Call{{CallID: "c1", Name: "deploy", IdempotencyKey: "k"}}}
	fs, err := p.Probe(context.Background(), tp, nil)
	if err != nil || len(fs) != 0 {
		t.Errorf("findings %+v, err %v: want none", fs, err)
	}
}

// TestTerminalInputEnds: input that ends before an answer is no answer.
func TestTerminalInputEnds(t *testing.T) {
	tp := &Terminal{In: strings.NewReader("maybe\n"), Out: io.Discard, Interactive: true, Who: "ops"}
	if a, err := tp.Probe(context.Background(), Question{CallID: "c1"}); !errors.Is(err, ErrNotAsked) {
		t.Errorf("answer %+v, err %v: want ErrNotAsked", a, err)
	}
}

func TestTerminalAsksAPerson(t *testing.T) {
	var out strings.Builder
	tp := &Terminal{In: strings.NewReader("maybe\nn\nchecked the deploy dashboard\n"), Out: &out, Interactive: true, Who: "ops"}
	a, err := tp.Probe(context.Background(), Question{Thread: "T", CallID: "c1", Name: "deploy", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != rollout.OutcomeNotExecuted || a.Evidence != "checked the deploy dashboard" || a.By != "person:ops" {
		t.Errorf("answer %+v", a)
	}
	if !strings.Contains(out.String(), "call c1 deploy (idempotency key k") {
		t.Errorf("the question was not shown: %q", out.String())
	}
}
