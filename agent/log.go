package agent

import (
	"context"
	"fmt"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// Sent is a send in this thread's log.
type Sent struct {
	MsgID, To, Kind, IdempotencyKey, InReplyTo string
	Body                                       []byte
}

// Received is a receipt in this thread's log (a message may have two after
// a crash between logging it and acknowledging it).
type Received struct {
	MsgID, From, Kind, IdempotencyKey, InReplyTo string
}

// Deliveries is what this thread's log says it sent and received: the
// thread's own record, read from the bus (the view in effect), in log
// order. An agent decides what is left to do from it, never from memory:
// after a crash the log is all that survives.
type Deliveries struct {
	Sent     []Sent
	Received []Received
}

// Deliveries reads the sends and receipts of this thread's view from the
// bus (after flushing what it wrote).
func (t *Thread) Deliveries(ctx context.Context) (*Deliveries, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if err := t.w.Flush(ctx); err != nil {
		return nil, t.failed(err)
	}
	src, err := ops.Load(ctx, t.c.bus, t.id)
	if err != nil {
		return nil, fmt.Errorf("agent: thread %s: %w", t.id, err)
	}
	cur, err := src.View.Forward(0)
	if err != nil {
		return nil, fmt.Errorf("agent: thread %s: %w", t.id, err)
	}
	d := &Deliveries{}
	err = rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		if e.Type != rollout.TypeEventMsg {
			return true, nil
		}
		switch e.EventKind() {
		case rollout.EventInterAgentSent:
			if s, err := rollout.Decode[rollout.InterAgentSent](&e.Record); err == nil {
				d.Sent = append(d.Sent, Sent{MsgID: s.MsgID, To: s.ToThread, Kind: s.Kind, IdempotencyKey: s.IdempotencyKey, InReplyTo: s.InReplyTo, Body: s.Body})
			}
		case rollout.EventInterAgentReceived:
			if r, err := rollout.Decode[rollout.InterAgentReceived](&e.Record); err == nil {
				d.Received = append(d.Received, Received{MsgID: r.MsgID, From: r.FromThread, Kind: r.Kind, IdempotencyKey: r.IdempotencyKey, InReplyTo: r.InReplyTo})
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("agent: thread %s: %w", t.id, err)
	}
	return d, nil
}

// LastOrdinal is the ordinal of the last record this Thread's rollout
// holds (written or enqueued).
func (t *Thread) LastOrdinal() int64 { return t.w.Next() - 1 }
