package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Plan is what a resume of one thread will do, decided from its replayed
// state and the delivery ledger; making it does no I/O.
type Plan struct {
	Thread string
	// StaleTurn is the turn at the tail that started and never ended; resume
	// appends turn_aborted{stale_after_crash} for it.
	StaleTurn *replay.Turn
	// Unknown lists every dangling call; Probe asks about those with an
	// idempotency key.
	Unknown []replay.Call
	// Sends are this thread's sends with no receipt anywhere.
	Sends []dedupe.Delivery
}

// Decide plans the resume of a thread.
func Decide(thread string, st *replay.State, deliveries []dedupe.Delivery) (*Plan, error) {
	if st.ReadOnly {
		return nil, fmt.Errorf("thread %s: %w", thread, rollout.ErrReadOnly)
	}
	p := &Plan{Thread: thread, Unknown: st.DanglingCalls}
	if n := len(st.Turns); n > 0 && st.Turns[n-1].Status == replay.StatusInterrupted {
		t := st.Turns[n-1]
		p.StaleTurn = &t
	}
	for _, d := range deliveries {
		if d.FromThread == thread && d.State == dedupe.Unconfirmed {
			p.Sends = append(p.Sends, d)
		}
	}
	return p, nil
}

// MailSearcher looks a send up on the bus: still on the MAIL stream, or
// received (its receipt in the receiver's rollout on the bus, which the
// mirror the ledger was built from may not hold yet).
type MailSearcher interface {
	Pending(ctx context.Context, to, msgID string) (bool, error)
	Received(ctx context.Context, to, msgID string) (bool, error)
}

// Finding is one answered question and the record it becomes.
type Finding struct {
	Question Question
	Answer   Answer
}

// Record is the reconciled event a finding is logged as.
func (f Finding) Record() rollout.Reconciled {
	return rollout.Reconciled{Type: rollout.EventReconciled, CallID: f.Question.CallID, MsgID: f.Question.MsgID,
		Outcome: f.Answer.Outcome, Evidence: f.Answer.Evidence, By: f.Answer.By}
}

// Probe asks the prober about every keyed call and every send of the plan.
// A question the prober could put to nobody (ErrNotAsked) has no finding: it
// stays open, for a person to reconcile.
// A send the MAIL stream still holds was published: that is proof enough,
// and the prober is not asked. A send neither in MAIL nor received was never
// published (a receiver logs its receipt before it acknowledges, and an
// acknowledged message leaves a work-queue stream): not executed.
func (p *Plan) Probe(ctx context.Context, pr Prober, mail MailSearcher) ([]Finding, error) {
	var out []Finding
	for _, c := range p.Unknown {
		if c.IdempotencyKey == "" {
			continue // nothing a probe could match; a person can reconcile it
		}
		q := Question{Thread: p.Thread, CallID: c.CallID, Name: c.Name, IdempotencyKey: c.IdempotencyKey, TurnID: c.TurnID}
		a, err := pr.Probe(ctx, q)
		if errors.Is(err, ErrNotAsked) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("probing %s: %w", q, err)
		}
		out = append(out, Finding{q, a})
	}
	for _, d := range p.Sends {
		q := Question{Thread: p.Thread, MsgID: d.MsgID, Name: d.Kind, IdempotencyKey: d.IdempotencyKey, To: d.ToThread}
		if mail != nil {
			pending, err := mail.Pending(ctx, d.ToThread, d.MsgID)
			if err != nil {
				return out, fmt.Errorf("searching MAIL for %s: %w", d.MsgID, err)
			}
			if pending {
				q.Mail = "pending"
				out = append(out, Finding{q, Answer{Outcome: rollout.OutcomeExecuted,
					Evidence: "published: still on the MAIL stream, awaiting " + d.ToThread, By: "probe:mail"}})
				continue
			}
			received, err := mail.Received(ctx, d.ToThread, d.MsgID)
			if err != nil {
				return out, fmt.Errorf("searching %s's rollout for %s: %w", d.ToThread, d.MsgID, err)
			}
			if received {
				q.Mail = "received"
				out = append(out, Finding{q, Answer{Outcome: rollout.OutcomeExecuted,
					Evidence: "published and received: " + d.ToThread + " logged its receipt", By: "probe:mail"}})
				continue
			}
			q.Mail = "absent"
			out = append(out, Finding{q, Answer{Outcome: rollout.OutcomeNotExecuted,
				Evidence: "not on the MAIL stream and not received: never published", By: "probe:mail"}})
			continue
		}
		a, err := pr.Probe(ctx, q)
		if errors.Is(err, ErrNotAsked) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("probing %s: %w", q, err)
		}
		out = append(out, Finding{q, a})
	}
	return out, nil
}
