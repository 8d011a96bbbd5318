package simcrash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/stream"
)

// Scenario is one crash: tree and seed script the run, the process dies
// the At-th time it reaches Point. The clean run (Point "") crashes
// nowhere; it counts how often each point is reached, which is the set
// of positions a crash can take.
type Scenario struct {
	Tree  string `json:"tree"`
	Seed  uint64 `json:"seed"`
	Point string `json:"point"`
	At    int    `json:"at"`
}

// ID names the scenario; ParseID reads it back (agent-sim's --scenario).
func (s Scenario) ID() string {
	if s.Point == "" {
		return fmt.Sprintf("%s/%d/clean", s.Tree, s.Seed)
	}
	return fmt.Sprintf("%s/%d/%s/%d", s.Tree, s.Seed, s.Point, s.At)
}

// ParseID reads a scenario id: tree/seed/point/at or tree/seed/clean.
func ParseID(id string) (Scenario, error) {
	parts := strings.Split(id, "/")
	bad := fmt.Errorf("scenario %q: want tree/seed/point/position or tree/seed/clean", id)
	if len(parts) < 3 || len(parts) > 4 {
		return Scenario{}, bad
	}
	seed, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return Scenario{}, bad
	}
	s := Scenario{Tree: parts[0], Seed: seed}
	if _, err := NewPlan(s.Tree, 1, "x"); err != nil {
		return Scenario{}, fmt.Errorf("scenario %q: %w", id, err)
	}
	if len(parts) == 3 {
		if parts[2] != "clean" {
			return Scenario{}, bad
		}
		return s, nil
	}
	if _, ok := PointInfo[parts[2]]; !ok {
		return Scenario{}, fmt.Errorf("scenario %q: no crash point %q", id, parts[2])
	}
	at, err := strconv.Atoi(parts[3])
	if err != nil || at < 1 {
		return Scenario{}, bad
	}
	s.Point, s.At = parts[2], at
	return s, nil
}

// Result is what one scenario did and what the checks found.
type Result struct {
	Scenario
	// Counts are the points reached by the first process (all of them, in
	// the clean run), by name.
	Counts map[string]int `json:"counts,omitempty"`
	// Reached: the first process died at the scenario's point (false: the
	// position was not reached, the run is not a crash scenario).
	Reached   bool     `json:"reached"`
	Processes int      `json:"processes"`
	Findings  int      `json:"findings"`   // probe answers recorded by resumes
	Resent    int      `json:"resent"`     // mail re-sent by resumes
	Acked     int      `json:"acked"`      // publishes acknowledged to the processes
	Effects   int      `json:"effects"`    // side effects carried out in the world
	Records   int64    `json:"records"`    // records of the tree's rollouts on the bus
	Problems  []string `json:"violations"` // every invariant broken, and any failure to check
	Elapsed   float64  `json:"elapsed_s"`
}

// Failed reports a violation.
func (r *Result) Failed() bool { return len(r.Problems) > 0 }

func (r *Result) fail(format string, a ...any) {
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

// run is one scenario being run.
type run struct {
	env   *Env
	plan  *Plan
	world *World
	sc    Scenario
	res   *Result
	// What the processes saw, for the checks.
	mu       sync.Mutex
	acked    []Acked
	subjects []string
	opened   []opened
	ackCut   string // receipt_before_ack: the thread whose ack was cut
	inflight string // before/after_effect: the key in flight at the crash
	// unconfirmed are the child results the crash leaves unconfirmed at
	// each thread (by the ledger's rules), for the tree check.
	unconfirmed map[string]int
	lastSeq     uint64 // the last stream sequence of the tree's rollouts
}

// opened is what one Open found.
type opened struct {
	thread string
	res    *agent.Resumed
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Run runs a scenario to the end and checks it. prefix makes its ids
// unique on the bus. A mirror crash point needs the bus to itself: see
// RunOwn.
func Run(ctx context.Context, env *Env, sc Scenario, prefix string) *Result {
	if mirrorPoint(sc.Point) {
		res := &Result{Scenario: sc}
		res.fail("crash point %s needs an env of its own (RunOwn)", sc.Point)
		return res
	}
	return run1(ctx, env, sc, prefix, nil)
}

// RunOwn runs a scenario on an env of its own, in a new directory under
// base (removed after): the bus holds this scenario's rollouts only, so
// the mirror's nth append is the same record in every run. Clean runs
// count the mirror's appends this way (the positions of the mirror's
// points); a mirror point's scenario kills the mirror there and restarts
// it, while the agents go on.
func RunOwn(ctx context.Context, base string, sc Scenario, prefix string) *Result {
	start := time.Now()
	res := &Result{Scenario: sc}
	dir, err := os.MkdirTemp(base, prefix+"-")
	if err != nil {
		res.fail("scenario env: %v", err)
		return res
	}
	defer os.RemoveAll(dir)
	fs := &crashFS{}
	if mirrorPoint(sc.Point) {
		fs.at, fs.torn = sc.At, sc.Point == PointMirrorTornWrite
	}
	env, err := NewEnv(ctx, EnvOptions{Dir: dir, FS: fs})
	if err != nil {
		res.fail("scenario env: %v", err)
		return res
	}
	defer env.Close()
	fs.died = func() {
		env.restarts.Add(1)
		go env.restartMirror(ctx)
	}
	res = run1(ctx, env, sc, prefix, fs)
	if sc.Point == "" {
		if res.Counts == nil {
			res.Counts = map[string]int{}
		}
		res.Counts[PointMirrorAfterAck] = fs.Appends()
		res.Counts[PointMirrorTornWrite] = fs.Appends()
	}
	res.Elapsed = time.Since(start).Seconds()
	return res
}

func run1(ctx context.Context, env *Env, sc Scenario, prefix string, fs *crashFS) *Result {
	start := time.Now()
	res := &Result{Scenario: sc}
	defer func() { res.Elapsed = time.Since(start).Seconds() }()
	plan, err := NewPlan(sc.Tree, sc.Seed, prefix)
	if err != nil {
		res.fail("%v", err)
		return res
	}
	r := &run{env: env, plan: plan, world: NewWorld(), sc: sc, res: res}
	done := false
	var wake map[string]bool // what a dead process held: the supervisor offers it again
	for n := 1; n <= 3 && !done; n++ {
		p := r.process(ctx, n, n == 1 && sc.Point != "" && !mirrorPoint(sc.Point), wake)
		var err error
		done, err = p.exec()
		p.stop()
		res.Processes = n
		if n == 1 {
			p.mu.Lock()
			res.Counts = maps.Clone(p.counts)
			p.mu.Unlock()
			res.Reached = p.died.Load()
		}
		if !p.died.Load() {
			if err != nil {
				res.fail("process %d: %v", n, err)
				return res
			}
			break
		}
		p.mu.Lock()
		wake = maps.Clone(p.held)
		p.mu.Unlock()
		for _, id := range plan.Order { // time passes: the dead process's leases and mailboxes expire
			if err := env.expire(ctx, id, p.name); err != nil {
				res.fail("recovery: %v", err)
				return res
			}
		}
	}
	if !done {
		res.fail("the tree did not complete after %d processes", res.Processes)
		return res
	}
	if mirrorPoint(sc.Point) {
		res.Reached = fs.gone()
	}
	if err := env.settled(); err != nil {
		res.fail("the mirror did not come back after its crash: %v", err)
		return res
	}
	if beforeCheck != nil {
		beforeCheck(r)
	}
	if sc.Point != "" && !res.Reached {
		return res // not a crash scenario: its position does not exist for this seed
	}
	r.check(ctx)
	return res
}

// Test hooks: mutants that must make the checks fail. Nil in production.
var (
	lyingProbe  atomic.Bool // the world's probe answers "not executed" for every call
	beforeCheck func(*run)  // runs just before the checks
)

// process is one agent process: one client, its threads, its crash plan.
type process struct {
	r      *run
	n      int
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	proxy  *Proxy
	client *agent.Client
	ops    *stream.Bus // the operator's bus, on the process's connection

	armed  bool // the scenario's crash is this process's
	mu     sync.Mutex
	counts map[string]int
	frames map[string]bool // msg ids of publishes counted already
	died   atomicBool
	gone   chan struct{} // closed when the process dies

	threads map[string]*threadRun
	held    map[string]bool // threads open (their lease held), under mu
	visited map[string]bool
	known   map[string]bool
	opens   int
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) Load() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

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
