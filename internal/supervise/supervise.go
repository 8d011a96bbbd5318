package supervise

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
)

// Options tune a Supervisor.
type Options struct {
	Interval time.Duration // between sweeps; default 500 ms
	Logger   *slog.Logger
}

// Supervisor offers runnable threads to workers.
type Supervisor struct {
	bus *stream.Bus
	o   Options
	// seen is the last heartbeat of each worker the last sweep saw.
	seen map[string]stream.WorkerInfo
	// orphans are threads of dead workers not yet seen held by a live one,
	// with the worker.
	orphans map[string]string
	// offeredOrphans: when each orphan was last offered, and how often.
	offeredOrphans map[string]orphanOffer
	// unknown are threads with mail and no THREADS entry (a child that
	// never wrote a line): not offered, logged once.
	unknown map[string]bool
	stats   Stats
}

// orphanOffer is when an orphan was last offered, and how many times.
type orphanOffer struct {
	at time.Time
	n  int
}

// maxOrphanOffers is how many times an orphan is offered before the
// supervisor gives up on seeing it held: the offer taken and the thread
// run between two sweeps looks the same as an offer lost.
const maxOrphanOffers = 3

// Stats count what the supervisor did.
type Stats struct {
	Sweeps, Offers, DeadWorkers int
}

// New returns a supervisor on bus.
func New(bus *stream.Bus, o Options) *Supervisor {
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Supervisor{bus: bus, o: o, seen: map[string]stream.WorkerInfo{}, orphans: map[string]string{},
		offeredOrphans: map[string]orphanOffer{}, unknown: map[string]bool{}}
}

// Run sweeps until ctx ends. A failed sweep is logged and retried at the
// next interval; Run returns only ctx's error.
func (s *Supervisor) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	failing := false
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*s.o.Interval+10*time.Second)
		err := s.Sweep(sctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !failing:
			s.o.Logger.Warn("supervisor sweep failed; retrying", "err", err)
			failing = true
		case err == nil && failing:
			s.o.Logger.Info("supervisor sweeps again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Stats returns what the supervisor did so far.
func (s *Supervisor) Stats() Stats { return s.stats }

// Sweep looks once for runnable threads and offers them.
func (s *Supervisor) Sweep(ctx context.Context) error {
	s.stats.Sweeps++
	workers, err := s.bus.Workers(ctx)
	if err != nil {
		return err
	}
	live := make(map[string]stream.WorkerInfo, len(workers))
	for _, w := range workers {
		live[w.ID] = w
	}
	for id, now := range live {
		if last, ok := s.seen[id]; !ok || incarnation(last) != incarnation(now) {
			// A process new to this sweep: the threads an earlier process
			// under its id held when it died, as it found them.
			for _, th := range now.Orphaned {
				s.orphans[th] = id
			}
		}
	}
	for id, last := range s.seen {
		if now, ok := live[id]; ok {
			if incarnation(last) != incarnation(now) {
				// Restarted under the same id: the old process is dead and
				// its threads are not in the new one's heartbeat.
				s.orphanThreads(id, last, now)
			}
			continue
		}
		if beat, err := time.Parse(time.RFC3339Nano, last.Beat); err == nil && time.Since(beat) < s.bus.WorkerTTL() {
			live[id] = last // not listed, yet its last beat is younger than the TTL: a glitch, not a death
			continue
		}
		s.orphanThreads(id, last, stream.WorkerInfo{})
	}
	s.seen = live

	mail, err := s.bus.MailWaitingThreads(ctx)
	if err != nil {
		return err
	}
	candidates := map[string]string{}
	for th := range s.orphans {
		candidates[th] = stream.OfferWorkerDied
	}
	for _, th := range mail {
		if _, ok := candidates[th]; !ok {
			candidates[th] = stream.OfferMail
		}
	}
	for th, reason := range candidates {
		l, err := s.bus.ReadLease(ctx, th)
		if err != nil {
			return err
		}
		_, orphan := s.orphans[th]
		if l != nil && time.Now().Before(l.Expires) {
			if orphan && heldByLive(live, th) {
				s.forget(th) // a live worker has it now
			}
			continue
		}
		known, err := s.bus.ThreadKnown(ctx, th)
		if err != nil {
			return err
		}
		if !known {
			if !s.unknown[th] {
				s.unknown[th] = true
				s.o.Logger.Info("mail waits for a thread no agent created; not offered", "thread", th)
			}
			continue
		}
		if o, ok := s.offeredOrphans[th]; orphan && ok {
			// Offered, and still not held: give the offer time to be taken
			// (a lease TTL for the taker, twice over), then offer again. The
			// offer may have been lost: taken by a worker that died, or
			// dropped by one that found the dead holder's lease still live.
			if time.Since(o.at) < 2*s.bus.WorkerTTL()+s.o.Interval {
				continue
			}
			s.o.Logger.Warn("an orphaned thread is still not held by a live worker; offering it again", "thread", th, "offers", o.n)
		}
		offered, err := s.bus.Offer(ctx, th, reason)
		if err != nil {
			return err
		}
		if orphan {
			o := s.offeredOrphans[th]
			o.at, o.n = time.Now(), o.n+1
			s.offeredOrphans[th] = o
			if o.n >= maxOrphanOffers {
				s.forget(th)
			}
		}
		if offered {
			s.stats.Offers++
			s.o.Logger.Debug("offered", "thread", th, "reason", reason)
		}
	}
	return nil
}

// forget drops an orphan: a live worker holds it, or it was offered enough.
func (s *Supervisor) forget(th string) {
	delete(s.orphans, th)
	delete(s.offeredOrphans, th)
}

// incarnation tells one process under a worker id from the next.
func incarnation(w stream.WorkerInfo) string {
	return fmt.Sprintf("%s/%d/%s", w.Host, w.PID, w.Started)
}

// orphanThreads marks the threads of a worker incarnation that died
// without a clean stop (last: its last heartbeat; now: the heartbeat of
// the process that restarted under its id, if any) for offering.
func (s *Supervisor) orphanThreads(id string, last, now stream.WorkerInfo) {
	if last.Stopped {
		return
	}
	s.stats.DeadWorkers++
	if now.ID != "" {
		s.o.Logger.Warn("worker restarted under the same id; the old process's threads will be offered", "worker", id, "threads", len(last.Threads), "old_pid", last.PID, "pid", now.PID)
	} else {
		s.o.Logger.Warn("worker stopped heartbeating; its threads will be offered to others", "worker", id, "threads", len(last.Threads))
	}
	for _, th := range last.Threads {
		s.orphans[th] = id
	}
}

func heldByLive(live map[string]stream.WorkerInfo, thread string) bool {
	for _, w := range live {
		for _, th := range w.Threads {
			if th == thread {
				return true
			}
		}
	}
	return false
}
