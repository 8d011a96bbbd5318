package dedupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// NewMsgID returns a new msg_id: a ULID.
func NewMsgID() string { return ulid.Make().String() }

// SendMail logs a cross-thread message in the sender's rollout, flushes it (a
// send that is published must be in the log), then publishes it to
// mail.<to> with Nats-Msg-Id = msg_id. If the process dies between the two,
// the log shows a send with no receipt: unconfirmed, and a resume finds out
// from MAIL whether it was published. It returns the logged payload, which a
// re-send publishes again under the same msg_id.
func SendMail(ctx context.Context, w *stream.Writer, bus *stream.Bus, from string, m rollout.InterAgentSent) ([]byte, error) {
	m.Type = rollout.EventInterAgentSent
	if m.MsgID == "" {
		m.MsgID = NewMsgID()
	}
	payload := rollout.MustJSON(m)
	if _, err := w.Append(ctx, rollout.Record{Timestamp: stamp(), Type: rollout.TypeEventMsg, Payload: payload}); err != nil {
		return nil, fmt.Errorf("dedupe: log send %s: %w", m.MsgID, err)
	}
	if err := w.Flush(ctx); err != nil {
		return nil, fmt.Errorf("dedupe: flush send %s: %w", m.MsgID, err)
	}
	faults.Point("mail.after-sent-flush") // crash tests: the send is logged, the mail not published
	if _, _, err := bus.PublishMail(ctx, from, m.ToThread, m.MsgID, payload); err != nil {
		return payload, err
	}
	return payload, nil
}

// ResendMail publishes a logged send again under its msg_id (never a new one).
func ResendMail(ctx context.Context, bus *stream.Bus, from string, payload []byte) error {
	var m rollout.InterAgentSent
	if err := json.Unmarshal(payload, &m); err != nil || m.MsgID == "" {
		return fmt.Errorf("dedupe: resend: not an inter_agent_sent payload")
	}
	_, _, err := bus.PublishMail(ctx, from, m.ToThread, m.MsgID, payload)
	return err
}

// ErrBadMail is returned (joined) for a mail message whose payload is not a
// send: it is acknowledged, so it cannot block the mailbox, and not logged.
var ErrBadMail = errors.New("dedupe: mail payload is not an inter_agent_sent")

// Received is a receipt logged by ReceiveMail with what the receiver acts
// on: the sender's body.
type Received struct {
	rollout.InterAgentReceived
	Body json.RawMessage // the sender's body, as sent
	Seq  uint64          // the message's MAIL stream sequence
}

// ReceiveMail takes up to n messages from a thread's mailbox; for each, as
// it arrives, it logs inter_agent_received, flushes, and only then
// acknowledges the message. A crash before the flush redelivers the message
// with nothing logged; a crash after the flush and before the ack redelivers
// it too, and the receipt is logged again (the ledger calls that
// possibly_duplicated: the receiver may have acted twice). A message this
// process already logged and acknowledged is only acknowledged again.
func ReceiveMail(ctx context.Context, w *stream.Writer, mb *stream.Mailbox, n int, wait time.Duration) ([]Received, error) {
	var got []Received
	var bad []error
	err := mb.Take(ctx, n, wait, func(mail *stream.Mail) error {
		if mail.Redelivered {
			return mail.Ack(ctx)
		}
		var s rollout.InterAgentSent
		if json.Unmarshal(mail.Payload, &s) != nil || s.MsgID == "" || s.MsgID != mail.MsgID {
			bad = append(bad, fmt.Errorf("%w: msg id %q from %q", ErrBadMail, mail.MsgID, mail.From))
			return mail.Ack(ctx)
		}
		faults.Point("mail.before-receipt") // crash tests: the mail is taken, its receipt not logged
		r := rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: s.MsgID, IdempotencyKey: s.IdempotencyKey,
			FromThread: mail.From, Kind: s.Kind, InReplyTo: s.InReplyTo}
		if _, err := w.Append(ctx, rollout.Record{Timestamp: stamp(), Type: rollout.TypeEventMsg, Payload: rollout.MustJSON(r)}); err != nil {
			return fmt.Errorf("dedupe: log receipt %s: %w", s.MsgID, err)
		}
		if err := w.Flush(ctx); err != nil {
			return fmt.Errorf("dedupe: flush receipt %s: %w", s.MsgID, err)
		}
		if err := mail.Ack(ctx); err != nil {
			return fmt.Errorf("dedupe: ack %s: %w", s.MsgID, err)
		}
		got = append(got, Received{InterAgentReceived: r, Body: s.Body, Seq: mail.Seq})
		return nil
	})
	if err != nil {
		return got, err
	}
	return got, errors.Join(bad...)
}

func stamp() string { return time.Now().UTC().Format(rollout.TimeLayout) }
