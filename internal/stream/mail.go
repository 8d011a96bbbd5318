package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// HeaderFrom names the sending thread of a MAIL message.
const HeaderFrom = "Logbook-From"

// PublishMail publishes a cross-thread message to mail.<to> with
// Nats-Msg-Id = msgID; the payload is the sender's inter_agent_sent payload,
// bytes as logged. A re-send under the same msg id inside the dedupe window
// is acknowledged as a duplicate (the window is not the judge of "delivered
// once": the rollouts are).
func (b *Bus) PublishMail(ctx context.Context, from, to, msgID string, payload []byte) (seq uint64, duplicate bool, err error) {
	for _, id := range []struct{ name, v string }{{"from thread", from}, {"to thread", to}, {"msg id", msgID}} {
		if err := rollout.ValidateID(id.name, id.v); err != nil {
			return 0, false, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
	}
	m := nats.NewMsg(MailSubject(to))
	m.Data = payload
	m.Header.Set(HeaderMsgID, msgID)
	m.Header.Set(HeaderFrom, from)
	ack, err := b.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, false, fmt.Errorf("stream: mail %s to %s: %w", msgID, to, err)
	}
	return ack.Sequence, ack.Duplicate, nil
}

// MailPending reports whether a message with msgID still waits on mail.<to>
// (published and not yet acknowledged by its receiver). MAIL is a work queue,
// so an acknowledged message is gone.
func (b *Bus) MailPending(ctx context.Context, to, msgID string) (bool, error) {
	subj := MailSubject(to)
	seq := uint64(1)
	for {
		m, err := b.getStreamMsg(ctx, StreamMail, seq, "", subj)
		if errors.Is(err, errNoMsg) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("stream: search MAIL for %s: %w", msgID, err)
		}
		if m.Header.Get(HeaderMsgID) == msgID {
			return true, nil
		}
		seq = m.Seq + 1
	}
}

// getStreamMsg is getMsg on any stream.
func (b *Bus) getStreamMsg(ctx context.Context, stream string, seq uint64, lastFor, nextFor string) (*storedMsg, error) {
	req := struct {
		Seq     uint64 `json:"seq,omitempty"`
		LastFor string `json:"last_by_subj,omitempty"`
		NextFor string `json:"next_by_subj,omitempty"`
	}{seq, lastFor, nextFor}
	body, _ := json.Marshal(req)
	resp, err := b.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject  string `json:"subject"`
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs"`
			Data     []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("stream: message get: %w", err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, errNoMsg
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, fmt.Errorf("stream: message get: empty response")
	}
	m := &storedMsg{Subject: r.Message.Subject, Seq: r.Message.Sequence, Data: r.Message.Data, Header: nats.Header{}}
	if len(r.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, fmt.Errorf("stream: message get: %w", err)
		}
	}
	return m, nil
}

// Mailbox is a thread's durable consumer on MAIL. The receiver logs and
// flushes inter_agent_received before it acknowledges a message; a message
// not acknowledged within AckWait is delivered again.
type Mailbox struct {
	thread string
	cons   jetstream.Consumer
}

// MailConsumerName is the durable consumer of a thread's mail.
func MailConsumerName(thread string) string { return "mail-" + thread }

// Mailbox opens (creating if needed) the thread's durable consumer.
func (b *Bus) Mailbox(ctx context.Context, thread string, ackWait time.Duration) (*Mailbox, error) {
	if err := rollout.ValidateID("thread id", thread); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}
	cons, err := b.js.CreateOrUpdateConsumer(ctx, StreamMail, jetstream.ConsumerConfig{
		Durable:       MailConsumerName(thread),
		FilterSubject: MailSubject(thread),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("stream: mailbox of %s: %w", thread, err)
	}
	return &Mailbox{thread: thread, cons: cons}, nil
}

// Mail is one message taken from a mailbox.
type Mail struct {
	MsgID   string
	From    string
	Payload []byte // the sender's inter_agent_sent payload
	msg     jetstream.Msg
}

// Ack acknowledges the message: it leaves MAIL. Only after the receipt is
// flushed to the receiver's rollout.
func (m *Mail) Ack(ctx context.Context) error { return m.msg.DoubleAck(ctx) }

// Fetch takes up to n messages, waiting at most wait for the first.
func (mb *Mailbox) Fetch(ctx context.Context, n int, wait time.Duration) ([]*Mail, error) {
	batch, err := mb.cons.Fetch(n, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, fmt.Errorf("stream: mailbox of %s: %w", mb.thread, err)
	}
	var out []*Mail
	for m := range batch.Messages() {
		out = append(out, &Mail{MsgID: m.Headers().Get(HeaderMsgID), From: m.Headers().Get(HeaderFrom), Payload: m.Data(), msg: m})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		return out, fmt.Errorf("stream: mailbox of %s: %w", mb.thread, err)
	}
	return out, nil
}
