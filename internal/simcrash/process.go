package simcrash

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/stream"
)

// process makes process n. Its first round visits D and the threads in
// wake (those a dead process held, wake nil: all); the others only when
// mail waits for them, as the supervisor offers threads.
func (r *run) process(ctx context.Context, n int, armed bool, wake map[string]bool) *process {
	p := &process{r: r, n: n, name: fmt.Sprintf("%s-p%d", r.plan.Prefix, n), armed: armed, counts: map[string]int{}, frames: map[string]bool{}, gone: make(chan struct{}),
		threads: map[string]*threadRun{}, held: map[string]bool{}, visited: map[string]bool{}, known: map[string]bool{}}
	if wake != nil {
		for _, id := range r.plan.Order {
			p.visited[id] = id != r.plan.D && !wake[id]
		}
	}
	p.ctx, p.cancel = context.WithCancel(ctx)
	return p
}

// start connects the process through its proxy.
func (p *process) start() error {
	var err error
	p.proxy, err = NewProxy(p.r.env.addr, p.rule, p.died0)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	p.client, err = agent.Connect(cctx, p.proxy.URL(), agent.Options{Name: p.name, Logger: quiet})
	if err != nil {
		return err
	}
	// A killed process says nothing: no "broken pipe" on stderr.
	p.client.Conn().SetErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	return nil
}

// opsBus is the operator's bus on the process's connection (opened when
// the operator first acts).
func (p *process) opsBus() (*stream.Bus, error) {
	if p.ops == nil {
		b, err := stream.Open(p.ctx, p.client.Conn(), stream.Options{Logger: quiet})
		if err != nil {
			return nil, err
		}
		p.ops = b
	}
	return p.ops, nil
}

// hit counts a point; true when the process dies there.
func (p *process) hit(name string) bool {
	p.mu.Lock()
	p.counts[name]++
	fire := p.armed && name == p.r.sc.Point && p.counts[name] == p.r.sc.At
	p.mu.Unlock()
	return fire
}

// rule is the proxy's judgement of each publish.
func (p *process) rule(f *Frame) Verdict {
	name := framePoint(f)
	if name == "" {
		return Forward
	}
	if id := frameID(f); id != "" {
		p.mu.Lock()
		seen := p.frames[id]
		p.frames[id] = true
		p.mu.Unlock()
		if seen {
			return Forward
		}
	}
	if !p.hit(name) {
		return Forward
	}
	if name == PointReceiptBeforeAck {
		p.r.mu.Lock()
		p.r.ackCut = ackThread(f.Subject)
		p.r.mu.Unlock()
	}
	return DropAndCut
}

// ackThread is the receiving thread of a MAIL ack subject
// ($JS.ACK.MAIL.mail-<thread>.<...>).
func ackThread(subj string) string {
	parts := strings.Split(subj, ".")
	if len(parts) < 4 {
		return ""
	}
	return strings.TrimPrefix(parts[3], "mail-")
}

// point is an in-code crash point: the process dies there when armed.
func (p *process) point(name string) bool {
	if !p.hit(name) {
		return false
	}
	p.die()
	return true
}

// died0 is the proxy's cut: the process is dead from that instant.
func (p *process) died0() {
	p.died.mu.Lock()
	was := p.died.v
	p.died.v = true
	p.died.mu.Unlock()
	if !was {
		close(p.gone)
	}
	p.cancel()
}

// die kills the process: nothing it does from now reaches the bus or the
// world.
func (p *process) die() {
	p.died0()
	p.proxy.Cut()
}

// effect is a keyed side effect in the world, with its crash points.
func (p *process) effect(thread, key string) agent.Effect {
	return func(context.Context) (string, error) {
		if p.point(PointBeforeEffect) {
			p.r.setInflight(key)
			return "", fmt.Errorf("%w: the process died", agent.ErrOutcomeUnknown)
		}
		p.died.mu.Lock()
		dead := p.died.v
		if !dead {
			p.r.world.exec(key)
		}
		p.died.mu.Unlock()
		if dead {
			return "", fmt.Errorf("%w: the process died", agent.ErrOutcomeUnknown)
		}
		if p.point(PointAfterEffect) {
			p.r.setInflight(key)
			return "", fmt.Errorf("%w: the process died", agent.ErrOutcomeUnknown)
		}
		return "applied " + key, nil
	}
}

func (r *run) setInflight(key string) {
	r.mu.Lock()
	r.inflight = key
	r.mu.Unlock()
}

// exec runs the process's program until it ends or the process dies. A
// dead process's program is not waited for: like a killed process's
// threads it is simply gone (its goroutine ends on its own, on a closed
// connection, touching nothing shared).
func (p *process) exec() (bool, error) {
	type result struct {
		done bool
		err  error
	}
	out := make(chan result, 1)
	go func() {
		done, err := p.run()
		if p.died.Load() { // drop the dead process's objects: their goroutines end
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			for _, t := range p.threads {
				t.th.Close(ctx)
			}
		}
		out <- result{done, err}
	}()
	select {
	case r := <-out:
		return r.done, r.err
	case <-p.gone:
		p.client.Close() // SIGKILL closes its sockets: every call waiting fails
		return false, errDied
	}
}

// stop ends the process: a live one closes its threads and releases their
// leases; a dead one's connection is closed (by exec).
func (p *process) stop() {
	if !p.died.Load() {
		ctx := context.WithoutCancel(p.ctx)
		for _, t := range p.threads {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			t.th.Close(cctx)
			cancel()
		}
	}
	if p.client != nil {
		p.client.Close()
	}
	if p.proxy != nil {
		p.r.mu.Lock()
		p.r.acked = append(p.r.acked, p.proxy.Acked()...)
		p.r.subjects = append(p.r.subjects, p.proxy.Subjects()...)
		p.r.mu.Unlock()
		p.proxy.Close()
	}
	p.cancel()
}

// errStuck: nothing is runnable and the tree is not done.
var errStuck = errors.New("nothing left to run and the tree is not done")

// run visits runnable threads, in the plan's order, until nothing is
// runnable: a thread not yet visited by this process, or with mail
// waiting. It returns whether the tree is done.
func (p *process) run() (bool, error) {
	if err := p.start(); err != nil {
		if p.died.Load() {
			return false, errDied
		}
		return false, fmt.Errorf("connect: %w", err)
	}
	plan := p.r.plan
	for round := 0; round < 100; round++ {
		progress := false
		waiting, err := p.r.env.mail(p.ctx)
		if err != nil {
			return false, p.failed(err)
		}
		for _, id := range plan.Order {
			if p.died.Load() {
				return false, errDied
			}
			if !p.known[id] {
				ok, err := p.r.env.exists(p.ctx, id)
				if err != nil {
					return false, p.failed(err)
				}
				if !ok && id != plan.D {
					continue
				}
				p.known[id] = ok
			}
			mail := 0
			if p.known[id] {
				mail = waiting[id]
			}
			if p.visited[id] && mail == 0 {
				continue
			}
			p.visited[id] = true
			progress = true
			if err := p.handle(id, mail); err != nil {
				return false, p.failed(err)
			}
		}
		if !progress {
			d := p.threads[plan.D]
			if d != nil && p.driverDone(d) {
				return true, nil
			}
			return false, errStuck
		}
	}
	return false, errors.New("still running after 100 rounds")
}

// failed is err, or errDied when the process died meanwhile.
func (p *process) failed(err error) error {
	if p.died.Load() {
		return errDied
	}
	return err
}

// handle runs one thread's program with mail waiting.
func (p *process) handle(id string, mail int) error {
	r := p.threads[id]
	if r == nil {
		var err error
		if r, err = p.open(id); err != nil {
			return err
		}
	}
	if err := r.receive(p.ctx, mail); err != nil {
		return err
	}
	if id == p.r.plan.D {
		return p.drive(r)
	}
	st, err := r.step(p.ctx, p, p.client)
	if err == nil && st == finished { // nothing more to do: a worker closes it
		err = p.release(id)
	}
	return err
}

// open opens (or, for D the first time, creates) a thread.
func (p *process) open(id string) (*threadRun, error) {
	p.opens++
	r := &threadRun{plan: p.r.plan, n: p.r.plan.Nodes[id], opens: p.n*100 + p.opens}
	if id == p.r.plan.D && !p.known[id] {
		th, err := p.client.StartRoot(p.ctx, agent.ThreadSpec{ID: id, Role: "driver"})
		if err != nil {
			return nil, err
		}
		r.th = th
		p.known[id] = true
		p.hold(id, r)
		return r, r.load(p.ctx, nil)
	}
	th, res, err := p.client.Open(p.ctx, id, agent.OpenOptions{Prober: prober{w: p.r.world, alive: func() bool { return !p.died.Load() }}, RetryProvenNotExecuted: true})
	if err != nil {
		return nil, err
	}
	r.th = th
	p.hold(id, r)
	p.r.mu.Lock()
	p.r.opened = append(p.r.opened, opened{thread: id, res: res})
	p.r.mu.Unlock()
	return r, r.load(p.ctx, res)
}

// release closes a thread this process holds (the operator is about to
// change its history), so that it is opened again when mail comes.
func (p *process) release(id string) error {
	r := p.threads[id]
	if r == nil {
		return nil
	}
	p.mu.Lock()
	delete(p.threads, id)
	delete(p.held, id)
	p.mu.Unlock()
	return r.th.Close(p.ctx)
}

func (p *process) hold(id string, r *threadRun) {
	p.mu.Lock()
	p.threads[id] = r
	p.held[id] = true
	p.mu.Unlock()
}
