package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// LeaseOptions say who takes a lease and how.
type LeaseOptions struct {
	// Holder names the taker in the lease value and in errors (a process,
	// host, role ...). Required.
	Holder string
	// Force takes over a live lease. The new epoch fences the old holder:
	// its next renewal fails and its next publish is refused.
	Force bool
}

// LeaseInfo is what LEASES holds for a thread.
type LeaseInfo struct {
	Holder   string
	Epoch    uint64
	Revision uint64
	Expires  time.Time // from the server's store time of the last renewal
}

// leaseValue is the JSON value of a LEASES key. Part of the wire format.
type leaseValue struct {
	Holder  string `json:"holder"`
	Epoch   uint64 `json:"epoch,omitempty"` // 0 in the taking write: the epoch is its revision
	Taken   string `json:"taken"`
	Renewed string `json:"renewed"`
}

// Lease is a writer's right to write a thread. Its epoch is the revision of
// the write that took it and does not change while it is held; it is renewed
// every TTL/3 by compare-and-swap on the last revision. A renewal that finds
// another revision (a takeover) or no key, or no successful renewal for a
// whole TTL, loses the lease: Done is closed and Err says why.
type Lease struct {
	bus    *Bus
	thread string
	holder string
	epoch  uint64
	ttl    time.Duration
	taken  time.Time

	renewMu sync.Mutex // one renewal at a time: two with the same revision would lose the lease
	mu      sync.Mutex
	rev     uint64    // revision of our last write
	renewed time.Time // local time just before our last successful write
	failed  error     // why the last renewal failed; nil after a success
	err     error     // non-nil once lost or released
	done    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

// TakeLease takes the lease of a thread. A live lease of another holder is
// refused with a *LeaseHeldError unless o.Force; an expired one is taken
// over. The lease renews itself until Release or loss.
func (b *Bus) TakeLease(ctx context.Context, thread string, o LeaseOptions) (*Lease, error) {
	if err := rollout.ValidateID("thread id", thread); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if o.Holder == "" {
		return nil, errors.New("stream: a lease needs a holder name")
	}
	now := time.Now()
	val, _ := json.Marshal(leaseValue{Holder: o.Holder, Taken: stamp(now), Renewed: stamp(now)})
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			return nil, fmt.Errorf("stream: lease of thread %s: still contended after %d attempts", thread, attempt)
		}
		start := time.Now()
		rev, err := b.leases.Create(ctx, thread, val)
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("stream: take lease of thread %s: %w", thread, err)
		}
		if err != nil {
			e, gerr := b.leases.Get(ctx, thread)
			if errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted) {
				continue // expired or released meanwhile
			}
			if gerr != nil {
				return nil, fmt.Errorf("stream: take lease of thread %s: %w", thread, gerr)
			}
			if bytes.Equal(e.Value(), val) {
				rev = e.Revision() // our own create, whose ack was lost
				b.log.Info("lease taken (create acknowledged late)", "thread", thread, "epoch", rev)
				return b.startLease(thread, o.Holder, rev, now, now), nil
			}
			cur := decodeLease(e)
			cur.Expires = e.Created().Add(b.leaseTTL)
			if !o.Force && time.Now().Before(cur.Expires) {
				return nil, &LeaseHeldError{Thread: thread, Holder: cur.Holder, Epoch: cur.Epoch, Expires: cur.Expires}
			}
			start = time.Now()
			rev, err = b.leases.Update(ctx, thread, val, e.Revision())
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || isWrongLastSeq(err) {
				continue // renewed or taken meanwhile, or our retried update landed: look again
			}
			if err != nil {
				return nil, fmt.Errorf("stream: take over lease of thread %s: %w", thread, err)
			}
			b.log.Info("lease taken over", "thread", thread, "from", cur.Holder, "old_epoch", cur.Epoch, "epoch", rev, "forced", o.Force)
		}
		return b.startLease(thread, o.Holder, rev, now, start), nil
	}
}

// startLease starts renewing a lease taken at revision rev; renewed is the
// local time just before the write that took it.
func (b *Bus) startLease(thread, holder string, rev uint64, taken, renewed time.Time) *Lease {
	l := &Lease{bus: b, thread: thread, holder: holder, epoch: rev, ttl: b.leaseTTL, taken: taken,
		rev: rev, renewed: renewed, done: make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.renewLoop()
	return l
}

// ReadLease returns the current lease of a thread, or nil when there is none.
func (b *Bus) ReadLease(ctx context.Context, thread string) (*LeaseInfo, error) {
	e, err := b.leases.Get(ctx, thread)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream: lease of thread %s: %w", thread, err)
	}
	info := decodeLease(e)
	info.Expires = e.Created().Add(b.leaseTTL)
	return &info, nil
}

// Leases returns every thread's current lease, read in one pass over the
// LEASES bucket (a watch of its latest values), for a view of many threads
// at once (coordinator tree). Expires is as ReadLease computes it.
func (b *Bus) Leases(ctx context.Context) (map[string]LeaseInfo, error) {
	w, err := b.leases.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("stream: leases: %w", err)
	}
	defer w.Stop()
	out := map[string]LeaseInfo{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stream: leases: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("stream: leases: the watch ended before its initial values")
			}
			if e == nil {
				return out, nil // every current value has been delivered
			}
			info := decodeLease(e)
			info.Expires = e.Created().Add(b.leaseTTL)
			out[e.Key()] = info
		}
	}
}

func decodeLease(e jetstream.KeyValueEntry) LeaseInfo {
	var v leaseValue
	_ = json.Unmarshal(e.Value(), &v) // a foreign value still has a revision
	info := LeaseInfo{Holder: v.Holder, Epoch: v.Epoch, Revision: e.Revision()}
	if info.Epoch == 0 {
		info.Epoch = e.Revision()
	}
	return info
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Thread is the thread the lease is for.
func (l *Lease) Thread() string { return l.thread }

// Holder is the name given when the lease was taken.
func (l *Lease) Holder() string { return l.holder }

// Epoch is the revision of the write that took the lease.
func (l *Lease) Epoch() uint64 { return l.epoch }

// Done is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err is nil while the lease is held; once it is lost, released, or no
// renewal succeeded for a whole TTL (it may have expired on the server),
// it wraps ErrLeaseLost.
func (l *Lease) Err() error { return l.check() }

// check fails once the lease is lost, or when no renewal succeeded for a
// whole TTL (the lease may have expired on the server: act as if lost).
func (l *Lease) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && time.Since(l.renewed) >= l.ttl {
		why := fmt.Errorf("no renewal succeeded for %s (TTL)", l.ttl)
		if l.failed != nil {
			why = fmt.Errorf("%w; the last renewal failed: %w", why, l.failed)
		}
		l.loseLocked(why)
	}
	return l.err
}

func (l *Lease) loseLocked(why error) {
	if l.err != nil {
		return
	}
	l.err = fmt.Errorf("%w: thread %s epoch %d: %w", ErrLeaseLost, l.thread, l.epoch, why)
	close(l.done)
	l.bus.log.Warn("lease lost", "thread", l.thread, "epoch", l.epoch, "reason", why)
}

// Renew renews the lease now.
func (l *Lease) Renew(ctx context.Context) error {
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	now := time.Now()
	val, _ := json.Marshal(leaseValue{Holder: l.holder, Epoch: l.epoch, Taken: stamp(l.taken), Renewed: stamp(now)})
	newRev, err := l.bus.leases.Update(ctx, l.thread, val, rev)
	faults.Point("lease.mid-renew") // crash tests: the renewal is on the bus (or not), its holder has not taken the answer
	mismatch := errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) || isWrongLastSeq(err)
	if mismatch {
		// An earlier renewal may have landed with its ack lost: then the key
		// holds our epoch at a newer revision. Anyone else's write does not.
		if e, gerr := l.bus.leases.Get(ctx, l.thread); gerr == nil && e.Revision() > rev && decodeLease(e).Epoch == l.epoch {
			if newRev, err = l.bus.leases.Update(ctx, l.thread, val, e.Revision()); err == nil {
				mismatch = false
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil:
		return l.err
	case mismatch:
		l.loseLocked(errors.New("taken over or expired (revision mismatch on renewal)"))
		return l.err
	case err != nil:
		l.failed = err
		return fmt.Errorf("stream: renew lease of thread %s: %w", l.thread, err)
	}
	l.rev, l.renewed, l.failed = newRev, now, nil
	return nil
}

func (l *Lease) renewLoop() {
	defer close(l.stopped)
	every := l.ttl / 3
	wait := every
	for {
		select {
		case <-l.stop:
			return
		case <-l.done:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		err := l.Renew(ctx)
		cancel()
		wait = every
		if err != nil {
			if l.check() != nil {
				return
			}
			l.bus.log.Warn("lease renewal failed; retrying", "thread", l.thread, "epoch", l.epoch, "err", err)
			wait = max(l.ttl/20, 10*time.Millisecond)
		}
	}
}

// Release stops renewing and deletes the key if it is still this lease's,
// so the next writer need not wait for the TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.mu.Unlock()
	<-l.stopped
	l.mu.Lock()
	lost := l.err
	rev := l.rev
	if l.err == nil {
		l.err = fmt.Errorf("%w: thread %s epoch %d: released", ErrLeaseLost, l.thread, l.epoch)
		close(l.done)
	}
	l.mu.Unlock()
	if lost != nil {
		return nil
	}
	err := l.bus.leases.Delete(ctx, l.thread, jetstream.LastRevision(rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !isWrongLastSeq(err) {
		return fmt.Errorf("stream: release lease of thread %s: %w", l.thread, err)
	}
	return nil
}
