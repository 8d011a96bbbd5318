package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Kinds of mail.
const (
	KindTask    = rollout.MsgTask   // parent to child: what to do
	KindResult  = rollout.MsgResult // child to parent: what came of it
	KindMessage = rollout.MsgNote   // anything else between threads
)

// Outgoing is a message to send to another thread.
type Outgoing struct {
	To   string // the receiving thread's id
	Kind string // KindTask, KindResult or KindMessage (default)
	Body any    // any JSON value; json.RawMessage is sent as given
	// IdempotencyKey names the message's intent: a re-send of the same
	// intent keeps it, so the receiver can tell a repeat. Default the
	// msg_id (every send a new intent).
	IdempotencyKey string
	InReplyTo      string // the msg_id this answers (a result answers its task)
}

// Mail is a message this thread received: its receipt is in the rollout.
type Mail struct {
	MsgID          string
	From           string // the sending thread, as the bus delivered it
	Kind           string
	IdempotencyKey string
	InReplyTo      string
	Body           json.RawMessage
	Seq            uint64 // its MAIL stream sequence
}

// Send sends a message through the delivery protocol: inter_agent_sent is
// logged and flushed in this thread, then the message is published to the
// receiver's mailbox with its msg_id as the bus's dedupe id. It returns the
// msg_id. If the publish fails after the log, the send is in the log and
// unconfirmed; the error says so, and a resume finds out from the bus
// whether it was published (never send it again under a new msg_id).
func (t *Thread) Send(ctx context.Context, m Outgoing) (string, error) {
	if err := t.usable(); err != nil {
		return "", err
	}
	if err := rollout.ValidateID("to thread", m.To); err != nil {
		return "", fmt.Errorf("agent: thread %s: %w", t.id, err)
	}
	if m.InReplyTo != "" {
		if err := rollout.ValidateID("in_reply_to", m.InReplyTo); err != nil {
			return "", fmt.Errorf("agent: thread %s: %w", t.id, err)
		}
	}
	switch m.Kind {
	case "":
		m.Kind = KindMessage
	case KindTask, KindResult, KindMessage:
	default:
		return "", fmt.Errorf("agent: thread %s: %w: mail kind %q (want %s, %s or %s)", t.id, ErrInvalid, m.Kind, KindTask, KindResult, KindMessage)
	}
	body, err := jsonBody(m.Body)
	if err != nil {
		return "", fmt.Errorf("agent: thread %s: mail to %s: %w", t.id, m.To, err)
	}
	return t.send(ctx, rollout.InterAgentSent{ToThread: m.To, Kind: m.Kind, Body: body, IdempotencyKey: m.IdempotencyKey, InReplyTo: m.InReplyTo})
}

// Reply sends a result for a received task: kind KindResult, in reply to
// its msg_id, with the idempotency key "result:<task's key>" so a repeated
// result for the same task is recognizable.
func (t *Thread) Reply(ctx context.Context, task Mail, body any) (string, error) {
	key := task.IdempotencyKey
	if key == "" {
		key = task.MsgID
	}
	return t.Send(ctx, Outgoing{To: task.From, Kind: KindResult, Body: body, IdempotencyKey: "result:" + key, InReplyTo: task.MsgID})
}

// send logs, flushes and publishes one message.
func (t *Thread) send(ctx context.Context, m rollout.InterAgentSent) (string, error) {
	if err := t.usable(); err != nil {
		return "", err
	}
	m.MsgID = dedupe.NewMsgID()
	if m.IdempotencyKey == "" {
		m.IdempotencyKey = m.MsgID
	}
	if _, err := dedupe.SendMail(ctx, t.w, t.c.bus, t.id, m); err != nil {
		if t.w.Acked() >= t.w.Next()-1 && t.w.Err() == nil {
			return m.MsgID, fmt.Errorf("agent: thread %s: mail %s to %s is logged but its publish failed (unconfirmed until a resume checks the bus): %w", t.id, m.MsgID, m.ToThread, err)
		}
		return "", t.failed(err)
	}
	return m.MsgID, nil
}

// Receive takes up to max messages from this thread's mailbox, waiting at
// most wait for the first: for each, inter_agent_received is logged and
// flushed before the message is acknowledged. A crash in between
// redelivers it; the ledger then shows the receipt twice
// (possibly_duplicated), because the thread may have acted twice.
func (t *Thread) Receive(ctx context.Context, max int, wait time.Duration) ([]Mail, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = 1
	}
	if t.mb == nil {
		mb, err := t.c.bus.Mailbox(ctx, t.id, 0)
		if err != nil {
			return nil, fmt.Errorf("agent: thread %s: %w", t.id, err)
		}
		t.mb = mb
	}
	got, err := dedupe.ReceiveMail(ctx, t.w, t.mb, max, wait)
	out := make([]Mail, 0, len(got))
	for _, r := range got {
		out = append(out, Mail{MsgID: r.MsgID, From: r.FromThread, Kind: r.Kind, IdempotencyKey: r.IdempotencyKey,
			InReplyTo: r.InReplyTo, Body: r.Body, Seq: r.Seq})
	}
	if err != nil {
		return out, fmt.Errorf("agent: thread %s: receive: %w", t.id, err)
	}
	return out, nil
}
