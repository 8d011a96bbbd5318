package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
)

// WorkerSpec describes a worker: a process that runs whatever threads the
// coordinator offers it.
type WorkerSpec struct {
	// ID names the worker in `coordinator workers` (default the Client's
	// Name); unique among live workers.
	ID string
	// Capacity is how many threads it runs at once (default 1).
	Capacity int
	// Prober is given to every Open (see OpenOptions.Prober).
	Prober Prober
	// RetryProvenNotExecuted is given to every Open: messages the bus
	// proved were never published are re-sent under their msg_id.
	RetryProvenNotExecuted bool
	// Heartbeat is how often it writes its heartbeat (default a third of
	// the lease TTL). A worker whose heartbeat is older than the TTL is
	// dead to the coordinator, which offers its threads to others.
	Heartbeat time.Duration
}

// Handler runs one thread a worker opened: res is what the resume found.
// It returns when the thread has nothing more to do for now (it waits for
// mail, or it is done); the worker then closes the thread, releasing its
// lease, and the coordinator offers it again when mail arrives. Handler
// must stop when ctx ends. A Handler that fails (an error other than
// ErrFenced or ErrLeaseLost: a bus call that timed out, say) has its thread
// offered again a second later, since nothing else might ever make it
// runnable (its mail may be taken already): a Handler must be safe to run
// again, reading what is left to do from the thread's log.
type Handler func(ctx context.Context, th *Thread, res *Resumed) error

// ErrPresumedDead: the worker's heartbeat lapsed for longer than its TTL
// (the process was stopped, or cut off): the coordinator has offered its
// threads to others, so it stops. Matches ErrLeaseLost too.
var ErrPresumedDead = fmt.Errorf("agent: worker presumed dead (heartbeat lapsed): %w", ErrLeaseLost)

// RunWorker registers this process as a worker and runs offered threads
// until ctx ends, at most Capacity at once. For each offer it opens the
// thread (Open: it takes the lease, so at most one worker ever holds a
// thread; an offer of a thread someone holds is dropped), calls h, and
// closes the thread. It returns nil when ctx ends after every thread is
// closed, and an error matching ErrFenced or ErrLeaseLost as soon as one
// of its threads was taken over or its heartbeat lapsed: a worker presumed
// dead stops instead of writing where others now write.
func (c *Client) RunWorker(ctx context.Context, spec WorkerSpec, h Handler) error {
	if spec.ID == "" {
		spec.ID = c.name
	}
	if spec.Capacity <= 0 {
		spec.Capacity = 1
	}
	ttl := c.bus.WorkerTTL()
	if spec.Heartbeat <= 0 || spec.Heartbeat > ttl/2 {
		spec.Heartbeat = ttl / 3
	}
	host, _ := os.Hostname()
	w := &worker{c: c, spec: spec, h: h, held: map[string]bool{},
		info: stream.WorkerInfo{ID: spec.ID, Host: host, PID: os.Getpid(), Capacity: spec.Capacity, Started: time.Now().UTC().Format(time.RFC3339Nano)}}
	if err := w.inherit(ctx); err != nil {
		return fmt.Errorf("agent: worker %s: %w", spec.ID, err)
	}
	if err := w.beat(ctx, false); err != nil {
		return fmt.Errorf("agent: worker %s: %w", spec.ID, err)
	}
	offers, err := c.bus.OpenOffers(ctx)
	if err != nil {
		return fmt.Errorf("agent: worker %s: %w", spec.ID, err)
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go w.heartbeats(runCtx, stop, ttl)
	active := 0
	done := make(chan struct{}, spec.Capacity)
	for runCtx.Err() == nil {
		for drained := false; !drained; { // count the threads that finished
			select {
			case <-done:
				active--
			default:
				drained = true
			}
		}
		if active == spec.Capacity {
			select {
			case <-done:
				active--
			case <-runCtx.Done():
			}
			continue
		}
		got, err := offers.Take(runCtx, spec.Capacity-active, time.Second)
		if err != nil && runCtx.Err() == nil {
			c.log.Warn("taking offers failed; retrying", "worker", spec.ID, "err", err)
			time.Sleep(200 * time.Millisecond)
		}
		for _, o := range got {
			active++
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				defer func() { done <- struct{}{} }()
				if err := w.run(runCtx, o); err != nil {
					stop(err)
				}
			}()
		}
	}
	w.wg.Wait()
	if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return fmt.Errorf("agent: worker %s stops: %w", spec.ID, cause)
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.beat(bctx, true); err != nil {
		c.log.Warn("last heartbeat failed", "worker", spec.ID, "err", err)
	}
	return nil
}

type worker struct {
	c    *Client
	spec WorkerSpec
	h    Handler
	wg   sync.WaitGroup

	mu       sync.Mutex
	info     stream.WorkerInfo
	held     map[string]bool
	lastBeat time.Time
	// beatMu makes each heartbeat's snapshot and write one step: two
	// beats in flight (the periodic one and a hold's) could otherwise land
	// in the other order, and an older list of threads overwrite the one
	// naming a thread just taken, which a death then loses.
	beatMu sync.Mutex
}

// run opens an offered thread, runs the handler and closes the thread. Only
// a takeover or a lost lease is returned: the worker must stop.
func (w *worker) run(ctx context.Context, o *stream.Offered) error {
	c := w.c
	// The heartbeat names the thread before its lease is taken: a death
	// right after the Open must not leave a thread no heartbeat names.
	w.hold(o.Thread, true)
	defer w.hold(o.Thread, false)
	th, res, err := c.Open(ctx, o.Thread, OpenOptions{Prober: w.spec.Prober, RetryProvenNotExecuted: w.spec.RetryProvenNotExecuted})
	var held *LeaseHeldError
	switch {
	case errors.As(err, &held):
		c.log.Info("offered thread is held by another; dropping the offer", "worker", w.spec.ID, "thread", o.Thread,
			"holder", held.Holder, "expires", held.Expires)
		o.Ack(ctx) // someone runs it; the supervisor offers it again if it stays runnable
		return nil
	case err != nil:
		c.log.Warn("opening an offered thread failed; giving the offer back", "worker", w.spec.ID, "thread", o.Thread, "err", err)
		o.Nak(time.Second)
		return nil
	}
	o.Ack(ctx)
	herr := w.h(ctx, th, res)
	cerr := th.Close(context.WithoutCancel(ctx))
	for _, err := range []error{herr, cerr} {
		if errors.Is(err, ErrFenced) || errors.Is(err, ErrLeaseLost) {
			return err
		}
	}
	if herr != nil && ctx.Err() == nil {
		// Nothing else may ever make the thread runnable again (its mail
		// already taken, its worker alive): offer it again, after a pause.
		c.log.Warn("thread handler failed; offering the thread again", "worker", w.spec.ID, "thread", o.Thread, "err", herr)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			select {
			case <-time.After(retryOfferAfter):
			case <-ctx.Done():
				return
			}
			if _, err := c.bus.Offer(ctx, o.Thread, stream.OfferRetry); err != nil && ctx.Err() == nil {
				c.log.Warn("offering a failed thread again failed", "worker", w.spec.ID, "thread", o.Thread, "err", err)
			}
		}()
	}
	return nil
}

// retryOfferAfter is how long a thread whose handler failed waits before
// it is offered again.
const retryOfferAfter = time.Second

func (w *worker) hold(thread string, on bool) {
	w.mu.Lock()
	if on {
		w.held[thread] = true
	} else {
		delete(w.held, thread)
	}
	w.mu.Unlock()
	if on { // the supervisor learns at once who holds it
		bctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.beat(bctx, false)
	}
}

// inherit reads the heartbeat an earlier process left under this id: if
// it died (no clean stop), the threads it held go into this process's
// heartbeats as Orphaned, for the supervisor to offer.
func (w *worker) inherit(ctx context.Context) error {
	prev, ok, err := w.c.bus.Worker(ctx, w.spec.ID)
	if err != nil {
		return err
	}
	if ok && !prev.Stopped && len(prev.Threads)+len(prev.Orphaned) > 0 {
		w.info.Orphaned = append(append([]string(nil), prev.Threads...), prev.Orphaned...)
		sort.Strings(w.info.Orphaned)
	}
	return nil
}

// beatSnapshotted is a test hook: it runs between a beat's snapshot of the
// threads held and its write. Nil in production.
var beatSnapshotted func(threads []string)

// beat writes the heartbeat with the threads held now.
func (w *worker) beat(ctx context.Context, stopped bool) error {
	w.beatMu.Lock()
	defer w.beatMu.Unlock()
	w.mu.Lock()
	info := w.info
	info.Stopped = stopped
	info.Threads = make([]string, 0, len(w.held))
	for th := range w.held {
		info.Threads = append(info.Threads, th)
	}
	w.mu.Unlock()
	sort.Strings(info.Threads)
	if beatSnapshotted != nil {
		beatSnapshotted(info.Threads)
	}
	if err := w.c.bus.Heartbeat(ctx, info); err != nil {
		return err
	}
	w.mu.Lock()
	w.lastBeat = time.Now()
	w.mu.Unlock()
	return nil
}

// heartbeats beats every Heartbeat until ctx ends; once no beat has
// succeeded for a TTL (the process was stopped or cut off) the worker is
// presumed dead and stops.
func (w *worker) heartbeats(ctx context.Context, stop context.CancelCauseFunc, ttl time.Duration) {
	t := time.NewTicker(w.spec.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		since := time.Since(w.lastBeat)
		w.mu.Unlock()
		if since > ttl {
			stop(fmt.Errorf("%w: no heartbeat for %v (TTL %v)", ErrPresumedDead, since.Round(time.Millisecond), ttl))
			return
		}
		bctx, cancel := context.WithTimeout(ctx, w.spec.Heartbeat)
		if err := w.beat(bctx, false); err != nil && ctx.Err() == nil {
			w.c.log.Warn("heartbeat failed", "worker", w.spec.ID, "err", err)
		}
		cancel()
	}
}
