package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

// outcome of a round's fault.
const (
	outKilled     = "killed"      // the harness killed (or stopped) the process
	outReached    = "reached"     // an armed point fired
	outNotReached = "not_reached" // the tree completed without reaching the armed point
)

// roundResult is what one round did and found.
type roundResult struct {
	fault
	Outcome string `json:"outcome"`
	// Died: the process an armed point killed, or the NATS node
	// (the ROLLOUTS leader) nats-leader-kill took down.
	Died string `json:"died,omitempty"`
	// Fenced: a stopped worker exited with a fencing error once continued.
	Fenced  bool `json:"fenced,omitempty"`
	Threads int  `json:"threads"`
	checkStats
	Violations []string `json:"violations,omitempty"`
	ElapsedSec float64  `json:"elapsed_s"`
	// Phases: arming, the tree until every thread reported, the driver's
	// receipt of the root's result, the checks (seconds).
	Phases map[string]float64 `json:"phases_s"`
}

// supervisor restarts what died on its own while a round runs, and notes
// armed points that fired.
type supervisor struct {
	mu      sync.Mutex
	r       *rig
	armed   []*proc // the processes armed for this round
	reached bool
	victim  string // the armed process that died at the point
	zombie  *proc
	fenced  bool
	// diskFaults counts the coordinator log's injected disk faults when a
	// disk fault was armed.
	diskFaults int
	err        error
}

func (s *supervisor) tick(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	for _, p := range append([]*proc{s.r.serve, s.r.world}, s.r.workers...) {
		done, expected := p.exited()
		if !done || expected {
			continue
		}
		tail := p.stderrTail()
		switch {
		case slices.Contains(s.armed, p) && !s.reached && p.killedBySIGKILL() && strings.Contains(tail, "crash point"):
			s.reached, s.victim = true, p.name
			p.mu.Lock()
			p.expect = true
			p.mu.Unlock()
		case p == s.zombie && (strings.Contains(tail, "presumed dead") || strings.Contains(tail, "fenced") || strings.Contains(tail, "lease")):
			s.fenced = true
			p.mu.Lock()
			p.expect = true
			p.mu.Unlock()
		}
	}
	s.err = s.r.supervise(ctx)
}

// locked runs fn with the supervisor paused.
func (s *supervisor) locked(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := fn(); err != nil && s.err == nil {
		s.err = err
	}
	return s.err
}

// diskFaultLine starts the line a coordinator logs for each injected disk
// fault (internal/stream/mirror, LOGBOOK_DISKFAULT).
const diskFaultLine = "faults: disk fault "

// runRound runs one round: the tree, the fault, recovery, the checks.
func runRound(ctx context.Context, r *rig, f fault, roundTimeout time.Duration) (*roundResult, error) {
	start := time.Now()
	res := &roundResult{fault: f, Phases: map[string]float64{}}
	mark := time.Now()
	phase := func(name string) { res.Phases[name] = time.Since(mark).Seconds(); mark = time.Now() }
	sup := &supervisor{r: r}
	victim := r.workers[f.Victim]
	kind, point, _ := strings.Cut(f.Point, ":")
	// Arm the round's point: the processes restart cleanly with it armed.
	// Every worker is armed, with one token file: the first to reach the
	// point takes the token and dies, the others go on (one fault a round).
	switch kind {
	case "worker":
		token := filepath.Join(r.dir, "tokens", fmt.Sprintf("round-%d", f.Round))
		if err := sup.locked(func() error {
			return restartWorkers(r.workers, func(w *proc) {
				w.args = append(withoutCrash(w.args), "--crash", point+":"+strconv.FormatInt(f.Hit, 10), "--crash-token", token)
				if point == "lease_renewal" { // turns long enough for a lease to be renewed (every TTL/3)
					w.args = append(w.args, "--think", (r.leaseTTL / 2).String())
				}
			})
		}); err != nil {
			return nil, err
		}
		sup.armed = r.workers
	case "coordinator":
		if err := sup.locked(func() error {
			r.serve.term(15 * time.Second)
			sup.armed = []*proc{r.serve}
			return r.startServe(ctx, []string{"LOGBOOK_CRASH=" + point + ":" + strconv.FormatInt(f.Hit, 10)})
		}); err != nil {
			return nil, err
		}
	case "disk":
		if err := sup.locked(func() error {
			r.serve.term(15 * time.Second)
			sup.diskFaults = r.serve.logCount(diskFaultLine)
			return r.startServe(ctx, []string{mirror.DiskFaultEnv + "=" + diskFaults[point] + ":" + strconv.FormatInt(f.Hit, 10)})
		}); err != nil {
			return nil, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	stopSup := make(chan struct{})
	supDone := make(chan struct{})
	go func() {
		defer close(supDone)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSup:
				return
			case <-rctx.Done():
				return
			case <-t.C:
				sup.tick(rctx)
			}
		}
	}()
	defer func() { close(stopSup); <-supDone }()

	phase("arm")
	zombieRan := false
	pl := buildPlan(f.Tree)
	res.Threads = len(pl.threads())
	driverID := "run-" + pl.root
	driverRollout, err := startTree(rctx, r.client, driverID, pl.root, f.Tree.Seed)
	if err != nil {
		return nil, fmt.Errorf("start the tree: %w", err)
	}
	// Random faults land at a moment of the work.
	switch f.Point {
	case "worker-kill", "coordinator-kill", "worker-stop", natsLeaderKill:
		select {
		case <-time.After(f.Delay):
		case <-rctx.Done():
		}
		res.Outcome = outKilled
		switch f.Point {
		case "worker-kill":
			err = sup.locked(func() error { victim.kill(); return victim.start() })
		case "coordinator-kill":
			err = sup.locked(func() error { r.serve.kill(); return r.startServe(rctx, nil) })
		case natsLeaderKill: // down for a lease TTL: past the raft election, leases may lapse
			err = sup.locked(func() error {
				name, err := r.cluster.killLeader(rctx, r.nc, r.leaseTTL)
				res.Died = name
				return err
			})
		case "worker-stop":
			err = sup.locked(func() error {
				victim.signal(syscall.SIGSTOP)
				victim.stopped = true
				sup.zombie = victim
				return nil
			})
			if err == nil {
				select { // past the lease and the heartbeat TTL: its threads move
				case <-time.After(2*r.leaseTTL + time.Second):
				case <-rctx.Done():
				}
				err = sup.locked(func() error { victim.signal(syscall.SIGCONT); victim.stopped = false; return nil })
			}
			// Continued, the zombie must find it was presumed dead and stop
			// (its next heartbeat check comes within a third of the TTL).
			for wait := time.Now().Add(2 * r.leaseTTL); err == nil && time.Now().Before(wait) && rctx.Err() == nil; {
				sup.mu.Lock()
				fenced := sup.fenced
				sup.mu.Unlock()
				if fenced {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Point, err)
		}
	}
	// Recovery: the tree completes (every thread reported to the world).
	if err := waitReports(rctx, r, pl); err != nil {
		return nil, err
	}
	phase("tree")
	if err := receiveResult(rctx, r.client, driverID, pl.root); err != nil {
		return nil, fmt.Errorf("the driver: %w", err)
	}
	if err := sup.locked(func() error {
		switch {
		case kind == "disk":
			// The fault does not kill: the coordinator must get over it
			// alone (the checks run against it, not restarted). One not
			// reached is disarmed by a clean restart.
			if r.serve.logCount(diskFaultLine) > sup.diskFaults {
				res.Outcome = outReached
				return nil
			}
			res.Outcome = outNotReached
			r.serve.term(15 * time.Second)
			return r.startServe(rctx, nil)
		case kind == "worker" || kind == "coordinator":
			if sup.reached {
				res.Outcome = outReached
				res.Died = sup.victim
				if kind == "worker" { // the others are still armed
					return restartWorkers(r.workers, func(w *proc) { w.args = withoutCrash(w.args) })
				}
			} else {
				res.Outcome = outNotReached
				// Disarm: a clean restart without the point.
				if kind == "worker" {
					return restartWorkers(r.workers, func(w *proc) { w.args = withoutCrash(w.args) })
				}
				r.serve.term(15 * time.Second)
				return r.startServe(rctx, nil)
			}
		case f.Point == "worker-stop":
			res.Fenced = sup.fenced
			if !res.Fenced {
				zombieRan = true
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if sup.err != nil {
		return nil, fmt.Errorf("restarting a child: %w", sup.err)
	}
	phase("driver")
	stats, violations, err := checkRound(rctx, r, pl, driverID, driverRollout)
	if err != nil {
		return nil, fmt.Errorf("a check could not run: %w", err)
	}
	if zombieRan {
		violations = append(violations, fmt.Sprintf("the stopped worker %s went on running after SIGCONT (no fencing error within %s)", victim.name, 2*r.leaseTTL))
	}
	res.checkStats, res.Violations = stats, violations
	phase("check")
	res.ElapsedSec = time.Since(start).Seconds()
	return res, nil
}

// restartWorkers stops the workers cleanly, all at once, changes their
// arguments and starts them again.
func restartWorkers(ws []*proc, change func(*proc)) error {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.term(10 * time.Second) }()
	}
	wg.Wait()
	for _, w := range ws {
		change(w)
		if err := w.start(); err != nil {
			return err
		}
	}
	return nil
}

// startTree creates the round's driver thread, spawns the tree's root with
// its task, and lets the driver go (its lease released: the result waits
// in its mailbox). It returns the driver's rollout.
func startTree(ctx context.Context, c *agent.Client, driverID, root string, seed uint64) (string, error) {
	var last error
	for ctx.Err() == nil {
		driver, err := c.StartRoot(ctx, agent.ThreadSpec{ID: driverID, Role: "sim-driver"})
		if errors.Is(err, agent.ErrThreadExists) { // created before a failure: open it
			var res *agent.Resumed
			driver, res, err = c.Open(ctx, driverID, agent.OpenOptions{})
			_ = res
		}
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		rid := driver.Rollout()
		d, err := driver.Deliveries(ctx)
		if err == nil && !sentKind(d, agent.KindTask, root) {
			err = spawn(ctx, driver, root)
		}
		driver.Close(context.WithoutCancel(ctx))
		if err == nil {
			return rid, nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("%w (last: %v)", ctx.Err(), last)
}

// waitReports waits until every planned thread has reported to the world.
func waitReports(ctx context.Context, r *rig, pl *plan) error {
	var missing []string
	for ctx.Err() == nil {
		l, err := r.wc.ledger(ctx)
		if err == nil {
			got := map[string]bool{}
			for _, rep := range l.Reports {
				got[rep.Thread] = true
			}
			missing = missing[:0]
			for _, th := range pl.threads() {
				if !got[th] {
					missing = append(missing, th)
				}
			}
			if len(missing) == 0 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the tree did not complete: %d of %d threads never reported (%s)", len(missing), len(pl.threads()), strings.Join(missing, ", "))
}

// receiveResult opens the driver again and takes the root's result.
func receiveResult(ctx context.Context, c *agent.Client, driverID, root string) error {
	var last error
	for ctx.Err() == nil {
		th, _, err := c.Open(ctx, driverID, agent.OpenOptions{})
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		done := false
		if d, err := th.Deliveries(ctx); err == nil {
			done = receivedFrom(d, agent.KindResult, root)
		}
		for !done && ctx.Err() == nil {
			mail, err := th.Receive(ctx, 1, time.Second)
			if err != nil {
				last = err
				break
			}
			for _, m := range mail {
				done = done || m.Kind == agent.KindResult && m.From == root
			}
		}
		th.Close(context.WithoutCancel(ctx))
		if done {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the root's result never arrived: %w (last: %v)", ctx.Err(), last)
}
