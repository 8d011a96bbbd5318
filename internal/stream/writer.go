package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// WriterOptions tune a Writer; zero values take the defaults.
type WriterOptions struct {
	QueueRecords   int           // unacknowledged records before Append waits; default 4096
	QueueBytes     int           // unacknowledged bytes before Append waits; default 64 MiB
	PublishTimeout time.Duration // one attempt's wait for an ack; default the bus's call timeout (5s)
	FailAfter      int           // failed attempts in a row before Flush and Err report them; default 3
	BackoffMin     time.Duration // first retry delay; default 20ms
	BackoffMax     time.Duration // retry delay cap; default 2s
	Now            func() time.Time

	hooks *hooks // fault injection for tests
}

func (o WriterOptions) withDefaults() WriterOptions {
	if o.QueueRecords <= 0 {
		o.QueueRecords = 4096
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 64 << 20
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = DefaultCallTimeout
	}
	if o.FailAfter <= 0 {
		o.FailAfter = 3
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 20 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// hooks let tests lose acks and reads on purpose; nil in production.
type hooks struct {
	// afterPublish may replace a publish outcome (after the server saw it).
	afterPublish func(p *pack, ack *jetstream.PubAck, err error) (*jetstream.PubAck, error)
	// beforeResolve may fail the read that resolves an ambiguous outcome.
	beforeResolve func(p *pack) error
}

// Stats counts a writer's work.
type Stats struct {
	Publishes int64 // packs acknowledged
	Records   int64 // records acknowledged
	Attempts  int64 // publish attempts, retries included
	Resolved  int64 // packs found landed by reading the tail after an unclear outcome
}

// Writer appends records to one rollout on the bus. It is safe for
// concurrent use. Callers enqueue; one goroutine publishes (see the package
// doc for the protocol).
type Writer struct {
	bus     *Bus
	lease   *Lease
	rollout string
	opts    WriterOptions
	limit   int // record line limit
	packMax int // payload bytes per pack

	mu           sync.Mutex
	next         int64   // ordinal of the next record
	acked        int64   // last acknowledged ordinal
	seq          uint64  // stream sequence of the subject's tail, as far as this writer knows
	queue        []entry // unacknowledged records in ordinal order
	queued       int     // bytes in queue
	materialized bool
	closing      bool
	fatal        error         // the writer stopped
	failing      *PublishError // publishes keep failing (retrying)
	lastErr      error         // why the last publish attempt failed; nil after a success
	changed      chan struct{} // closed and replaced on every change
	stats        Stats

	wake   chan struct{}
	ctx    context.Context // canceled by abort
	abort  context.CancelFunc
	exited chan struct{}
}

type entry struct {
	ord  int64
	line []byte
}

// OpenWriter opens a writer for a rollout of the lease's thread. It reads the
// rollout's tail and continues after it; an empty rollout is deferred
// (nothing is published) until a meaningful record or Materialize.
func (b *Bus) OpenWriter(ctx context.Context, lease *Lease, rolloutID string, o WriterOptions) (*Writer, error) {
	if err := rollout.ValidateID("rollout id", rolloutID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if err := lease.check(); err != nil {
		return nil, err
	}
	tail, last, lastSeq, err := b.ValidTail(ctx, rolloutID)
	if err != nil {
		return nil, err
	}
	return b.openWriter(lease, rolloutID, KnownTail{Tail: tail, Last: last, LastSeq: lastSeq}, o)
}

// KnownTail is a rollout's valid tail as a caller has just read it by the
// valid-tail rule (ValidPacks, ValidPacksFrom): the tail, the record at it
// (zero for an empty rollout), and the subject's last stream sequence,
// accepted or not, which the first publish must expect.
type KnownTail struct {
	Tail    Tail
	Last    rollout.Record
	LastSeq uint64
}

// ErrTailMoved: OpenWriterAt found records accepted past the tail the
// caller read: the caller's view of the rollout is stale.
var ErrTailMoved = errors.New("stream: the rollout grew past the tail read")

// OpenWriterAt is OpenWriter continuing after a tail the caller has just
// read (a resume that read the rollout once, from its mirror and the bus
// past it), so the rollout is not read again. Fencing is not weakened: the
// subject's last message is looked up (one get from the stream leader); if
// anything was stored after known.LastSeq, those messages are judged by
// the valid-tail rule from known.Tail (ValidPacksFrom), and any accepted
// one fails the open with ErrTailMoved (read again); junk past it is
// skipped as OpenWriter skips it. Then, as OpenWriter: a sealed tail is
// refused, a tail of a newer epoch than the lease's is a *FencedError,
// and every publish expects the subject's last sequence.
func (b *Bus) OpenWriterAt(ctx context.Context, lease *Lease, rolloutID string, known KnownTail, o WriterOptions) (*Writer, error) {
	if err := rollout.ValidateID("rollout id", rolloutID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if err := lease.check(); err != nil {
		return nil, err
	}
	m, err := b.getMsg(ctx, 0, RolloutSubject(rolloutID), "")
	switch {
	case errors.Is(err, errNoMsg):
		if known.LastSeq != 0 {
			return nil, fmt.Errorf("rollout %s: the bus holds no message, the tail read was at sequence %d", rolloutID, known.LastSeq)
		}
	case err != nil:
		return nil, fmt.Errorf("stream: tail of rollout %s: %w", rolloutID, err)
	case m.Seq < known.LastSeq:
		return nil, fmt.Errorf("rollout %s: the subject's last message is at sequence %d, the tail read was at %d", rolloutID, m.Seq, known.LastSeq)
	case m.Seq > known.LastSeq:
		accepted := 0
		tail, last, err := b.ValidPacksFrom(ctx, rolloutID, known.Tail, func(*Packed) error { accepted++; return nil })
		if err != nil {
			return nil, err
		}
		if accepted > 0 {
			return nil, fmt.Errorf("%w: rollout %s: ordinals %d-%d stored after ordinal %d", ErrTailMoved, rolloutID, known.Tail.Ordinal+1, tail.Ordinal, known.Tail.Ordinal)
		}
		known.LastSeq = last
	}
	return b.openWriter(lease, rolloutID, known, o)
}

func (b *Bus) openWriter(lease *Lease, rolloutID string, known KnownTail, o WriterOptions) (*Writer, error) {
	tail, last := known.Tail, known.Last
	if last.Type == rollout.TypeEventMsg && last.EventKind() == rollout.EventRolloutSealed {
		succ, _ := rollout.LookupString(last.Payload, "successor_rollout_id")
		return nil, fmt.Errorf("%w: rollout %s was replaced by %s (a revert); write the thread's current rollout", ErrSealed, rolloutID, succ)
	}
	if tail.Epoch > lease.Epoch() {
		return nil, &FencedError{Rollout: rolloutID, Ordinal: tail.Ordinal + 1, Seq: tail.Seq, StoredEpoch: tail.Epoch, Epoch: lease.Epoch()}
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = b.callTimeout
	}
	o = o.withDefaults()
	w := &Writer{
		bus: b, lease: lease, rollout: rolloutID, opts: o,
		limit: b.recordLimit, packMax: MaxRecord(b.nc.MaxPayload()),
		next: tail.Ordinal + 1, acked: tail.Ordinal, seq: known.LastSeq, materialized: tail.Seq > 0,
		changed: make(chan struct{}), wake: make(chan struct{}, 1), exited: make(chan struct{}),
	}
	w.ctx, w.abort = context.WithCancel(context.Background())
	go w.run()
	return w, nil
}

// Rollout is the rollout id.
func (w *Writer) Rollout() string { return w.rollout }

// Epoch is the writer's lease epoch.
func (w *Writer) Epoch() uint64 { return w.lease.Epoch() }

// Append enqueues a record and returns its ordinal, waiting for room while
// the queue is full (back-pressure) until ctx ends. A record with Ordinal 0
// gets the next one; a given ordinal must be the next one. Transient events
// (rollout.Persist) are dropped: ordinal 0, no error. Records that are too
// large or invalid are refused with nothing written.
func (w *Writer) Append(ctx context.Context, r rollout.Record) (int64, error) {
	return w.enqueue(ctx, r, false)
}

// TryAppend is Append that fails with ErrQueueFull instead of waiting.
func (w *Writer) TryAppend(r rollout.Record) (int64, error) {
	return w.enqueue(context.Background(), r, true)
}

func (w *Writer) enqueue(ctx context.Context, r rollout.Record, try bool) (int64, error) {
	ords, err := w.enqueueAll(ctx, []rollout.Record{r}, try)
	if err != nil || len(ords) == 0 {
		return 0, err
	}
	return ords[0], nil
}

// AppendAll enqueues records as one unit: every one is checked first, and
// if any is refused (too large, invalid, a wrong ordinal) none is enqueued.
// It returns their ordinals (0 for a dropped transient event). It waits for
// room for all of them, as Append does for one.
func (w *Writer) AppendAll(ctx context.Context, recs ...rollout.Record) ([]int64, error) {
	return w.enqueueAll(ctx, recs, false)
}

func (w *Writer) enqueueAll(ctx context.Context, recs []rollout.Record, try bool) ([]int64, error) {
	ps := make([]*prepared, len(recs))
	size, meaningful := 0, false
	for i := range recs {
		if !rollout.Persist(&recs[i]) {
			continue
		}
		p, err := prepare(recs[i], w.limit, w.opts.Now)
		if err != nil {
			return nil, fmt.Errorf("rollout %s: %w", w.rollout, err)
		}
		ps[i] = p
		size += p.size
		meaningful = meaningful || p.meaningful
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if err := w.stateLocked(); err != nil {
			return nil, err
		}
		if meaningful { // a deferred rollout publishes from its first meaningful record on
			w.materializeLocked()
		}
		if len(w.queue) == 0 || (len(w.queue)+len(ps) <= w.opts.QueueRecords && w.queued+size <= w.opts.QueueBytes) {
			break
		}
		if try {
			return nil, fmt.Errorf("rollout %s: %w (%d records, %d bytes unacknowledged)", w.rollout, ErrQueueFull, len(w.queue), w.queued)
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			w.mu.Lock()
			return nil, fmt.Errorf("rollout %s: waiting for room in the queue: %w", w.rollout, ctx.Err())
		case <-ch:
		}
		w.mu.Lock()
	}
	ords := make([]int64, len(ps))
	lines := make([][]byte, len(ps))
	ord := w.next
	for i, p := range ps {
		if p == nil {
			continue
		}
		if recs[i].Ordinal != 0 && recs[i].Ordinal != ord {
			return nil, fmt.Errorf("rollout %s: %w: record has ordinal %d, the next is %d", w.rollout, ErrWrongOrdinal, recs[i].Ordinal, ord)
		}
		if p.meta != nil && ord == 1 && (p.meta.ID != w.lease.Thread() || p.meta.Rollout() != w.rollout) {
			return nil, fmt.Errorf("rollout %s ordinal 1: %w: canonical session_meta names thread %q rollout %q; the writer holds thread %q rollout %q",
				w.rollout, ErrInvalidRecord, p.meta.ID, p.meta.Rollout(), w.lease.Thread(), w.rollout)
		}
		line := p.encode(ord)
		if len(line) > w.limit {
			return nil, fmt.Errorf("rollout %s ordinal %d: %w: %d bytes, the limit is %d", w.rollout, ord, ErrTooLarge, len(line), w.limit)
		}
		lines[i], ords[i] = line, ord
		ord++
	}
	for i, line := range lines {
		if line == nil {
			continue
		}
		w.queue = append(w.queue, entry{ord: ords[i], line: line})
		w.queued += len(line)
		w.next++
	}
	w.poke()
	return ords, nil
}

// stateLocked is the error every call returns once the writer cannot take
// more records.
func (w *Writer) stateLocked() error {
	if w.fatal != nil {
		return w.fatal
	}
	if err := w.lease.check(); err != nil {
		w.stopLocked(err)
		return err
	}
	if w.closing {
		return fmt.Errorf("rollout %s: %w", w.rollout, ErrClosed)
	}
	return nil
}

// Materialize makes a deferred rollout publish what it holds (and what
// follows) even without a meaningful record.
func (w *Writer) Materialize() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.materializeLocked()
}

func (w *Writer) materializeLocked() {
	if !w.materialized {
		w.materialized = true
		w.poke()
	}
}

// Materialized reports whether the rollout is (or will be) on the bus.
func (w *Writer) Materialized() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.materialized
}

func (w *Writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// broadcastLocked wakes everyone waiting on a change.
func (w *Writer) broadcastLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *Writer) stopLocked(err error) {
	if w.fatal == nil {
		w.fatal = err
		w.broadcastLocked()
	}
}

// Flush returns once every record appended before the call is acknowledged
// by the bus. It returns early with the writer's error: a *PublishError
// while publishes keep failing (the records are kept and retried; a later
// Flush may succeed), or the error that stopped the writer. A deferred
// rollout has nothing to flush.
func (w *Writer) Flush(ctx context.Context) error { return w.wait(ctx, true) }

func (w *Writer) wait(ctx context.Context, stopOnFailing bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := w.next - 1
	for {
		switch {
		case w.acked >= target:
			return nil
		case w.fatal != nil:
			return w.fatal
		case !w.materialized:
			return nil
		case stopOnFailing && w.failing != nil:
			e := *w.failing
			return &e
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			w.mu.Lock()
			err := fmt.Errorf("rollout %s: flush to ordinal %d (acknowledged %d): %w", w.rollout, target, w.acked, ctx.Err())
			switch {
			case w.failing != nil:
				err = fmt.Errorf("%w; %w", err, w.failing)
			case w.lastErr != nil:
				// Fewer than FailAfter attempts failed: still say why, so a
				// full disk or a lost bus is not a bare deadline.
				err = fmt.Errorf("%w; the last publish attempt failed: %w", err, w.lastErr)
			}
			return err
		case <-ch:
		}
		w.mu.Lock()
	}
}

// Err is the writer's status: nil while healthy, a *PublishError while
// publishes keep failing, or the error that stopped it.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fatal != nil {
		return w.fatal
	}
	if w.failing != nil {
		e := *w.failing
		return &e
	}
	return nil
}

// Acked is the last acknowledged ordinal (0 for none).
func (w *Writer) Acked() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// Next is the ordinal the next record gets.
func (w *Writer) Next() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// Stats returns the writer's counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Unacknowledged returns the lines (with '\n') not yet acknowledged, in
// ordinal order: after the writer stopped, the unwritten suffix.
func (w *Writer) Unacknowledged() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([][]byte, len(w.queue))
	for i, e := range w.queue {
		out[i] = e.line
	}
	return out
}

// Done is closed when the writer's publisher has stopped.
func (w *Writer) Done() <-chan struct{} { return w.exited }

// Close stops taking records, waits until everything appended is
// acknowledged (retrying through failures) or ctx ends, and stops the
// publisher. A ctx without a deadline (a close on the way out) still ends:
// Close gives up once nothing was acknowledged for the bus's
// UnavailableAfter plus one publish timeout. A deferred rollout publishes
// nothing. The lease is not released: it belongs to the caller.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	already := w.closing
	w.closing = true
	materialized := w.materialized
	w.broadcastLocked()
	w.mu.Unlock()
	var err error
	if materialized && !already {
		err = w.waitProgress(ctx)
	}
	w.abort()
	<-w.exited
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.queue); n > 0 && w.materialized && err == nil {
		err = fmt.Errorf("rollout %s: closed with %d records unacknowledged from ordinal %d", w.rollout, n, w.queue[0].ord)
	}
	w.stopLocked(fmt.Errorf("rollout %s: %w", w.rollout, ErrClosed))
	return err
}

// waitProgress is wait (through failures) bounded, when ctx has no
// deadline, by progress: it gives up after a stall of UnavailableAfter plus
// one publish timeout with nothing acknowledged.
func (w *Writer) waitProgress(ctx context.Context) error {
	if _, ok := ctx.Deadline(); ok {
		return w.wait(ctx, false)
	}
	stall := w.bus.unavailableAfter + w.opts.PublishTimeout
	for {
		before := w.Acked()
		sctx, cancel := context.WithTimeout(ctx, stall)
		err := w.wait(sctx, false)
		cancel()
		if err == nil || ctx.Err() != nil || w.Acked() == before {
			if err != nil && sctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w: nothing acknowledged for %s: %w", ErrBusUnavailable, stall, err)
			}
			return err
		}
	}
}
