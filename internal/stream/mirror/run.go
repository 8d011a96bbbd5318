package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
)

// Run mirrors ROLLOUTS until ctx ends, then returns nil once its goroutines
// (the index's catch-up, the compressor) have stopped. Failures (the bus
// unreachable, a disk error) are logged, shown in Status, and retried from
// the watermark with back-off. It returns an error only when the mirror
// cannot go on safely: the watermark is ahead of the bus (ErrAheadOfBus).
func (m *Mirror) Run(ctx context.Context, bus *stream.Bus) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	m.issued = bus.LeaseRevision
	m.count(func(s *Status) { s.Running = true })
	defer m.count(func(s *Status) { s.Running = false })
	if m.cfg.Index != nil {
		wg.Add(1)
		go func() { defer wg.Done(); m.runIndexer(ctx) }()
	}
	if m.cfg.ColdAfter > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); m.runCold(ctx) }()
	}
	m.bus, m.runCtx = bus, ctx
	if !m.awaitEpochs(ctx) {
		return nil
	}
	if err := m.refetchAll(ctx); err != nil && ctx.Err() == nil {
		m.log.Error("mirror: start-up check of the mirror files against the bus failed; gaps are refilled when their rollout's next message arrives", "err", err)
	}
	const backoffMin, backoffMax = 50 * time.Millisecond, 5 * time.Second
	backoff := backoffMin
	for {
		err := m.checkStream(ctx, bus)
		progress := false
		if err == nil {
			progress, err = m.consume(ctx, bus)
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrAheadOfBus) {
			m.log.Error("mirror: stopped", "err", err)
			m.count(func(s *Status) { s.Err = err.Error() })
			return err
		}
		if progress {
			backoff = backoffMin
		}
		m.log.Warn("mirror: consuming failed; retrying from the watermark", "err", err, "watermark", m.Watermark(), "in", backoff)
		m.count(func(s *Status) { s.Err = err.Error() })
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, backoffMax)
	}
}

// awaitEpochs rebuilds a missing or damaged epoch journal from the bus,
// retrying with back-off while it cannot (nothing is mirrored meanwhile: a
// batch must journal its epochs); false when ctx ends first.
func (m *Mirror) awaitEpochs(ctx context.Context) bool {
	backoff := 50 * time.Millisecond
	for m.ej.rebuild {
		err := m.rebuildEpochs(ctx)
		if err == nil {
			m.count(func(s *Status) { s.Err = "" })
			break
		}
		if ctx.Err() != nil {
			return false
		}
		m.log.Warn("mirror: cannot rebuild the epoch journal from the bus yet; retrying", "err", err, "in", backoff)
		m.count(func(s *Status) { s.Err = err.Error() })
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return ctx.Err() == nil
}

// checkStream compares the watermark with ROLLOUTS: it must not be past its
// last sequence, nor belong to another stream of that name.
func (m *Mirror) checkStream(ctx context.Context, bus *stream.Bus) error {
	info, err := bus.StreamInfo(ctx, stream.StreamRollouts)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	wm := m.Watermark()
	m.mu.Lock()
	created := m.wm.StreamCreated
	m.mu.Unlock()
	switch {
	case wm > info.State.LastSeq:
		return fmt.Errorf("%w: %s says sequence %d is mirrored, stream %s ends at %d (was the bus's store lost or replaced?)",
			ErrAheadOfBus, datadir.MirrorState, wm, stream.StreamRollouts, info.State.LastSeq)
	case wm > 0 && !created.IsZero() && !created.Equal(info.Created):
		return fmt.Errorf("%w: %s belongs to stream %s created %s, the bus's was created %s",
			ErrAheadOfBus, datadir.MirrorState, stream.StreamRollouts, created.Format(time.RFC3339Nano), info.Created.Format(time.RFC3339Nano))
	}
	if created.IsZero() {
		m.mu.Lock()
		m.wm.StreamCreated = info.Created.UTC()
		m.mu.Unlock()
	}
	if info.State.Msgs > 0 && info.State.FirstSeq > wm+1 {
		m.log.Warn("mirror: the bus no longer holds messages after the watermark (removed from the stream); they cannot be mirrored",
			"watermark", wm, "first_seq", info.State.FirstSeq)
	}
	return nil
}

// consumerResets bounds how often the ordered consumer recreates itself
// after missed heartbeats (a leader change, a lost connection) before its
// iterator fails; each attempt waits at most 10 s, 1 s to 10 s apart. The
// mirror then logs the failure, shows it in Status and starts a consumer
// again from the watermark (Run), so an unreachable bus is visible instead
// of a consumer retrying out of sight for ever.
const consumerResets = 5

// consume follows an ordered consumer from the watermark and commits
// batches: a batch takes what the bus has ready, up to the batch limits,
// and ends when the bus reports nothing more pending. progress says a batch
// was committed.
func (m *Mirror) consume(ctx context.Context, bus *stream.Bus) (progress bool, err error) {
	start := m.Watermark() + 1
	var cons jetstream.Consumer
	err = bus.Call(ctx, "mirror consumer", func(ctx context.Context) (err error) {
		cons, err = bus.JetStream().OrderedConsumer(ctx, stream.StreamRollouts, jetstream.OrderedConsumerConfig{
			DeliverPolicy:    jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:      start,
			MaxResetAttempts: consumerResets,
		})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("mirror: consumer from sequence %d: %w", start, err)
	}
	buffer := max(64<<20, 2*int(bus.Conn().MaxPayload()))
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(m.cfg.BatchMessages, buffer))
	if err != nil {
		return false, fmt.Errorf("mirror: consumer: %w", err)
	}
	defer it.Stop()
	// A consumer resetting itself does not watch ctx: stopping the iterator
	// ends the reset when the mirror stops.
	defer context.AfterFunc(ctx, it.Stop)()
	var msgs []jetstream.Msg
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return progress, err
		}
		msgs = append(msgs[:0], msg)
		size := len(msg.Data())
		var nextErr error
		for len(msgs) < m.cfg.BatchMessages && size < m.cfg.BatchBytes {
			// More is on its way from the server (pending), or may already
			// be in the consumer's buffer, which pending does not count:
			// take it if it is there at once.
			if pending(msg) > 0 {
				msg, nextErr = it.Next(jetstream.NextContext(ctx))
			} else {
				msg, nextErr = it.Next(jetstream.NextMaxWait(bufferedWait))
			}
			if nextErr != nil {
				if errors.Is(nextErr, nats.ErrTimeout) {
					nextErr = nil // the buffer is empty: the batch is complete
				}
				break
			}
			msgs = append(msgs, msg)
			size += len(msg.Data())
		}
		if err := m.commit(msgs); err != nil {
			return progress, err
		}
		clear(msgs)
		progress = true
		if nextErr != nil {
			return progress, nextErr
		}
	}
}

// bufferedWait is how long a batch waits for a message the bus does not
// report as pending: long enough to take one already buffered, too short to
// add latency.
const bufferedWait = 200 * time.Microsecond

func pending(msg jetstream.Msg) uint64 {
	md, err := msg.Metadata()
	if err != nil {
		return 0
	}
	return md.NumPending
}

// indexChunk is how many rollouts the indexer hands the index at once.
const indexChunk = 256

// runIndexer tells the index about the rollouts each batch touched, after
// the batch is durable. It does not hold up the next batch: the index may
// read lines a later batch has written and not fsynced yet (they are on the
// bus already; see the package doc, Crashes).
func (m *Mirror) runIndexer(ctx context.Context) {
	failing := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		m.mu.Lock()
		ids := make([]string, 0, len(m.dirty))
		for id := range m.dirty {
			ids = append(ids, id)
		}
		clear(m.dirty)
		m.mu.Unlock()
		slices.Sort(ids)
		// Chunks of rollouts are caught up together (one transaction for
		// many small ones); each is held from re-representation (cold
		// compression) meanwhile, taken in id order.
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), indexChunk)]
			ids = ids[len(chunk):]
			held := make([]*ro, len(chunk))
			for i, id := range chunk {
				held[i] = m.rollout(id)
				held[i].repr.RLock()
			}
			err := m.cfg.Index.CatchUpRollouts(ctx, chunk, func(id string, n int, err error) {
				m.count(func(s *Status) {
					s.Indexed += uint64(n)
					if err != nil {
						s.IndexErr = err.Error()
					}
				})
				if err != nil && !failing[id] {
					m.log.Warn("mirror: the index could not catch up a rollout; it lags there", "rollout", id, "err", err)
				}
				failing[id] = err != nil
			})
			for _, r := range held {
				r.repr.RUnlock()
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				m.count(func(s *Status) { s.IndexErr = err.Error() })
				m.log.Warn("mirror: the index could not catch up; it lags", "rollouts", len(chunk), "err", err)
			}
		}
	}
}
