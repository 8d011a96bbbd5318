package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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
	// A retry resends under the same msg id: one that landed is
	// acknowledged as a duplicate, so the mail is stored once.
	var ack *jetstream.PubAck
	err = b.retry(ctx, "mail publish", func(ctx context.Context) (err error) {
		ack, err = b.js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(0))
		return err
	})
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

// getStreamMsg reads one message of a stream with the STREAM.MSG.GET API,
// which the stream leader answers (a direct get may be served by a lagging
// replica): by sequence, the last of a subject, or the next of a subject
// from a sequence.
func (b *Bus) getStreamMsg(ctx context.Context, stream string, seq uint64, lastFor, nextFor string) (*storedMsg, error) {
	req := struct {
		Seq     uint64 `json:"seq,omitempty"`
		LastFor string `json:"last_by_subj,omitempty"`
		NextFor string `json:"next_by_subj,omitempty"`
	}{seq, lastFor, nextFor}
	body, _ := json.Marshal(req)
	var resp *nats.Msg
	err := b.retry(ctx, "get from "+stream, func(ctx context.Context) (err error) {
		resp, err = b.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
		if err == nil {
			err = transientAPIError(resp.Data)
		}
		return err
	})
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
	bus    *Bus
	thread string
	cons   jetstream.Consumer
	mu     sync.Mutex
	acked  map[uint64]bool // stream sequences acknowledged by this process (recent)
	order  []uint64
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
	cfg := jetstream.ConsumerConfig{
		Durable:       MailConsumerName(thread),
		FilterSubject: MailSubject(thread),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// A mailbox left by a process that died is removed by the server
		// (its messages stay in MAIL for the next mailbox).
		InactiveThreshold: MailboxIdle,
	}
	var cons jetstream.Consumer
	err := b.retry(ctx, "mailbox consumer", func(ctx context.Context) (err error) {
		cons, err = b.js.CreateOrUpdateConsumer(ctx, StreamMail, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream: mailbox of %s: %w", thread, err)
	}
	return &Mailbox{thread: thread, cons: cons, acked: map[uint64]bool{}, bus: b}, nil
}

// MailboxIdle is how long a mailbox consumer nobody pulls from lives. The
// server allows a bounded number of consumers per stream (1,000 by
// default), so mailboxes are opened while a thread runs and deleted when it
// closes (Mailbox.Close); this bound cleans up after processes that died.
const MailboxIdle = 5 * time.Minute

// Close deletes the mailbox's consumer. What it holds stays in MAIL (a
// message taken and not acknowledged is delivered again to the next
// mailbox of the thread).
func (mb *Mailbox) Close(ctx context.Context) error {
	err := mb.bus.retry(ctx, "delete mailbox", func(ctx context.Context) error {
		err := mb.bus.js.DeleteConsumer(ctx, StreamMail, MailConsumerName(mb.thread))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("stream: close mailbox of %s: %w", mb.thread, err)
	}
	return nil
}

// Mail is one message taken from a mailbox.
type Mail struct {
	MsgID   string
	From    string
	Payload []byte // the sender's inter_agent_sent payload
	Seq     uint64 // its MAIL stream sequence
	// Redelivered: this process already acknowledged this very message (its
	// ack was lost, or it came round again before the ack landed); ack it
	// again, do not log another receipt.
	Redelivered bool
	msg         jetstream.Msg
	mb          *Mailbox
}

// Ack acknowledges the message: it leaves MAIL. Only after the receipt is
// flushed to the receiver's rollout. One attempt, bounded by the call
// timeout, not retried (the server does not answer a second ack of a
// message it removed): a message whose ack failed is delivered again
// after AckWait, and its receipt is logged again (possibly_duplicated).
func (m *Mail) Ack(ctx context.Context) error {
	ctx, cancel := m.mb.bus.callCtx(ctx)
	defer cancel()
	if err := m.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("stream: ack mail %s: %w", m.MsgID, err)
	}
	m.mb.remember(m.Seq)
	return nil
}

func (mb *Mailbox) remember(seq uint64) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.acked[seq] {
		return
	}
	mb.acked[seq] = true
	mb.order = append(mb.order, seq)
	if len(mb.order) > 4096 {
		delete(mb.acked, mb.order[0])
		mb.order = mb.order[1:]
	}
}

// Take hands up to n messages to fn one at a time, as they arrive, waiting
// at most wait in all. Handling each before the next arrives keeps the
// receipt's log-flush-ack well inside the consumer's AckWait. A pull cut
// short by the cluster (the node leading the consumer shut down, its
// leadership moved, the pull's heartbeats stopped) ends the Take with what
// it handed over and no error, as a wait that ran out does: the caller
// takes again, from the new leader.
func (mb *Mailbox) Take(ctx context.Context, n int, wait time.Duration, fn func(*Mail) error) error {
	batch, err := mb.cons.Fetch(n, jetstream.FetchMaxWait(wait))
	if err != nil {
		return fmt.Errorf("stream: mailbox of %s: %w", mb.thread, err)
	}
	for m := range batch.Messages() {
		mail := &Mail{MsgID: m.Headers().Get(HeaderMsgID), From: m.Headers().Get(HeaderFrom), Payload: m.Data(), msg: m, mb: mb}
		if meta, err := m.Metadata(); err == nil {
			mail.Seq = meta.Sequence.Stream
		}
		mb.mu.Lock()
		mail.Redelivered = mb.acked[mail.Seq]
		mb.mu.Unlock()
		if err := fn(mail); err != nil {
			return err
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		if pullCutShort(err) {
			mb.bus.log.Warn("mail pull cut short by the cluster; taking again", "thread", mb.thread, "err", err)
			return nil
		}
		return fmt.Errorf("stream: mailbox of %s: %w", mb.thread, err)
	}
	return nil
}

// pullCutShort reports a pull request the cluster ended before its wait:
// a retry against the consumer's new leader can cure it.
func pullCutShort(err error) bool {
	return errors.Is(err, jetstream.ErrServerShutdown) || errors.Is(err, jetstream.ErrConsumerLeadershipChanged) ||
		errors.Is(err, jetstream.ErrNoHeartbeat)
}
