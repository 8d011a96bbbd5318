package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream API error codes the publisher tells apart. Every other failure
// (10163 after a leader change, 10158 msg id in process, timeouts, lost
// connections) is resolved by reading the tail and retried.
const (
	codeWrongLastSeq      = 10071 // expected last subject sequence is stale
	codeWrongLastSeqConst = 10164 // the same, on a replicated stream with the subject in flight
	codeMessageTooLarge   = 10054 // message size exceeds the stream's maximum
)

// run is the writer's publisher: one pack in flight at a time; whatever was
// appended meanwhile goes into the next pack.
func (w *Writer) run() {
	defer close(w.exited)
	for {
		w.mu.Lock()
		for !(w.materialized && len(w.queue) > 0) {
			if w.fatal != nil {
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			select {
			case <-w.wake:
			case <-w.ctx.Done():
				return
			case <-w.lease.Done():
				w.mu.Lock()
				w.stopLocked(w.lease.Err())
				w.mu.Unlock()
				return
			}
			w.mu.Lock()
		}
		p, n := w.packLocked()
		seq := w.seq
		w.mu.Unlock()

		newSeq, err := w.commit(p, seq)

		w.mu.Lock()
		if err != nil {
			w.stopLocked(err)
			w.mu.Unlock()
			return
		}
		for _, e := range w.queue[:n] {
			w.queued -= len(e.line)
		}
		w.queue = append(w.queue[:0:0], w.queue[n:]...)
		w.acked, w.seq = p.last, newSeq
		w.failing, w.lastErr = nil, nil
		w.stats.Publishes++
		w.stats.Records += int64(n)
		w.broadcastLocked()
		w.mu.Unlock()
	}
}

// packLocked takes the longest prefix of the queue that fits one message.
// Its boundaries are final: retries resend exactly these bytes.
func (w *Writer) packLocked() (*pack, int) {
	size, n := 0, 0
	for n < len(w.queue) && (n == 0 || size+len(w.queue[n].line) <= w.packMax) {
		size += len(w.queue[n].line)
		n++
	}
	data := make([]byte, 0, size)
	for _, e := range w.queue[:n] {
		data = append(data, e.line...)
	}
	return &pack{rollout: w.rollout, first: w.queue[0].ord, last: w.queue[n-1].ord, epoch: w.lease.Epoch(), data: data}, n
}

// commit publishes p on top of the subject's tail seq until it is known to
// be stored (its stream sequence), or known not to be possible: fenced,
// lease lost, aborted, or refused for good.
func (w *Writer) commit(p *pack, seq uint64) (uint64, error) {
	m := p.msg()
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
	var since time.Time
	for attempt := 1; ; attempt++ {
		if err := w.lease.check(); err != nil {
			return 0, err
		}
		if err := w.ctx.Err(); err != nil {
			return 0, fmt.Errorf("rollout %s: %w (aborted with ordinals %d-%d in flight)", w.rollout, ErrClosed, p.first, p.last)
		}
		ctx, cancel := context.WithTimeout(w.ctx, w.opts.PublishTimeout)
		ack, err := w.bus.js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(0))
		if h := w.opts.hooks; h != nil && h.afterPublish != nil {
			ack, err = h.afterPublish(p, ack, err)
		}
		cancel()
		w.mu.Lock()
		w.stats.Attempts++
		w.mu.Unlock()
		if err == nil && !ack.Duplicate {
			return ack.Sequence, nil
		}
		if permanent(err) {
			return 0, fmt.Errorf("rollout %s ordinals %d-%d: refused by the server: %w", w.rollout, p.first, p.last, err)
		}
		// Duplicate, wrong last sequence, a timeout, a lost connection: the
		// pack may be stored. Believe only what the tail holds.
		landed, rerr := w.resolve(p, seq)
		if rerr == nil && landed > 0 {
			w.mu.Lock()
			w.stats.Resolved++
			w.mu.Unlock()
			return landed, nil
		}
		var fenced *FencedError
		if errors.As(rerr, &fenced) {
			w.bus.log.Warn("writer fenced", "rollout", w.rollout, "err", rerr)
			return 0, rerr
		}
		cause := err
		if cause == nil {
			cause = fmt.Errorf("duplicate ack for seq %d not found at the tail", ack.Sequence)
		}
		if rerr != nil {
			cause = fmt.Errorf("%w; then %w", cause, rerr)
		}
		if since.IsZero() {
			since = time.Now()
		}
		w.mu.Lock()
		w.lastErr = cause
		w.mu.Unlock()
		if attempt >= w.opts.FailAfter {
			w.mu.Lock()
			if w.failing == nil {
				w.bus.log.Warn("publishes failing; records kept, retrying", "rollout", w.rollout, "first", p.first, "err", cause)
				w.broadcastLocked()
			}
			w.failing = &PublishError{Rollout: w.rollout, First: p.first, Attempts: attempt, Since: since, Err: cause}
			w.mu.Unlock()
		}
		delay := w.opts.BackoffMin << min(attempt-1, 20)
		if delay > w.opts.BackoffMax || delay <= 0 {
			delay = w.opts.BackoffMax
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
		case <-w.lease.Done():
			t.Stop()
		}
	}
}

// resolve reads the first message of the subject after seq. Our msg id and
// bytes: the pack landed (its sequence is returned). Someone else's: a
// *FencedError. Nothing: 0, nil (retry). A failed read: the error (retry).
func (w *Writer) resolve(p *pack, seq uint64) (uint64, error) {
	if h := w.opts.hooks; h != nil && h.beforeResolve != nil {
		if err := h.beforeResolve(p); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.opts.PublishTimeout)
	defer cancel()
	got, err := w.bus.getMsg(ctx, seq+1, "", RolloutSubject(w.rollout))
	if errors.Is(err, errNoMsg) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream: read tail of rollout %s: %w", w.rollout, err)
	}
	id := MsgID(p.rollout, p.first, p.last, p.epoch)
	if got.Header.Get(HeaderMsgID) == id && bytes.Equal(got.Data, p.data) {
		return got.Seq, nil
	}
	f := &FencedError{Rollout: w.rollout, Ordinal: p.first, Seq: got.Seq, StoredMsgID: got.Header.Get(HeaderMsgID), Epoch: p.epoch}
	if e, err := strconv.ParseUint(got.Header.Get(HeaderEpoch), 10, 64); err == nil {
		f.StoredEpoch = e
	}
	return 0, f
}

// permanent reports a publish error that no retry can fix.
func permanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == codeMessageTooLarge
}

// isWrongLastSeq reports a wrong-last-sequence API error (10071 or 10164).
func isWrongLastSeq(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == codeWrongLastSeq || api.ErrorCode == codeWrongLastSeqConst)
}
