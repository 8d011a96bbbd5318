package simcrash

import (
	"context"
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

// LieInProbes makes the world's probe answer "not executed" for every call
// until undo is called: a mutant the checks must catch (the checker's own
// tests, here and in agent-sim's). Not for concurrent use with real runs.
func LieInProbes() (undo func()) {
	lyingProbe.Store(true)
	return func() { lyingProbe.Store(false) }
}

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
