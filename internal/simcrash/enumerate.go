package simcrash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options say what Enumerate walks.
type Options struct {
	Trees  []string // default Trees
	Points []string // default Points
	Seeds  []uint64 // default 1
	// Parallel scenarios at once (default 8: they wait on round trips
	// more than they compute).
	Parallel int
	// Progress, if set, is called after each scenario.
	Progress func(done int, r *Result)
	// KeepResults keeps every result in the report (default: the failed
	// ones only).
	KeepResults bool
	// MirrorSeeds is how many of the seeds (the first ones) the mirror's
	// points are walked for (0: all). Each mirror scenario has a bus of
	// its own, and a tree's run offers as many mirror positions as it
	// publishes messages.
	MirrorSeeds int
	// Scratch is where the scenarios with an env of their own put it
	// (default a directory in env's data dir).
	Scratch string
}

// Cell is one row of the table: a tree and a point.
type Cell struct {
	Tree       string  `json:"tree"`
	Point      string  `json:"point"`
	Scenarios  int     `json:"scenarios"`
	Violations int     `json:"violations"`
	Positions  int     `json:"max_position"` // the most positions one seed offered
	Seconds    float64 `json:"seconds"`      // summed scenario time
}

// Report is what Enumerate ran and found.
type Report struct {
	Seeds []uint64 `json:"seeds"`
	// MirrorSeeds are the seeds the mirror's points were walked for.
	MirrorSeeds []uint64 `json:"mirror_seeds"`
	// Scenarios counts distinct crash scenarios run: tree x seed x point x
	// position, each a run that died at its point and recovered. Clean
	// runs (one per tree and seed) are counted apart.
	Scenarios int `json:"scenarios"`
	Clean     int `json:"clean_runs"`
	// Repeats are the tree x seed pairs not run: their script is an
	// earlier seed's (Plan.Script), so their scenarios would not be new.
	Repeats    int     `json:"repeated_scripts_skipped"`
	Violations int     `json:"violations"` // scenarios (clean runs included) that broke an invariant
	Cells      []*Cell `json:"table"`
	// Totals over every run.
	Processes int   `json:"processes"`
	Findings  int   `json:"probe_findings"`
	Resent    int   `json:"mail_resent"`
	Acked     int   `json:"acked_packs_checked"`
	Effects   int   `json:"effects"`
	Records   int64 `json:"records"`
	// Failed are the runs that broke an invariant (all runs with
	// KeepResults).
	Failed     []*Result `json:"failed"`
	Results    []*Result `json:"results,omitempty"`
	ElapsedSec float64   `json:"elapsed_s"`
}

var runNonce atomic.Int64

// prefixes gives every run ids of its own: e<nonce>x<n>, the nonce from
// the clock (ids stay unique on a bus that outlives this process).
type prefixes struct {
	nonce string
	n     atomic.Int64
}

func newPrefixes() *prefixes {
	n := time.Now().UnixNano()/1000 + runNonce.Add(1)
	return &prefixes{nonce: strconv.FormatInt(n%(36*36*36*36*36*36*36), 36)}
}

func (p *prefixes) next() string { return "e" + p.nonce + "x" + strconv.FormatInt(p.n.Add(1), 36) }

// Enumerate runs, for every tree and seed, the clean run and then every
// crash scenario its counts make: each point at each position it was
// reached. Scenarios run Parallel at a time on env.
func Enumerate(ctx context.Context, env *Env, opt Options) (*Report, error) {
	start := time.Now()
	if len(opt.Trees) == 0 {
		opt.Trees = Trees
	}
	if len(opt.Points) == 0 {
		opt.Points = Points
	}
	if len(opt.Seeds) == 0 {
		opt.Seeds = []uint64{1}
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 8
	}
	for _, t := range opt.Trees {
		if !slices.Contains(Trees, t) {
			return nil, fmt.Errorf("simcrash: unknown tree %q (want %v)", t, Trees)
		}
	}
	for _, p := range opt.Points {
		if _, ok := PointInfo[p]; !ok {
			return nil, fmt.Errorf("simcrash: unknown crash point %q (want %v)", p, Points)
		}
	}
	rep := &Report{Seeds: opt.Seeds, MirrorSeeds: []uint64{}}
	cells := map[[2]string]*Cell{}
	for _, t := range opt.Trees {
		for _, p := range append([]string{""}, opt.Points...) {
			c := &Cell{Tree: t, Point: p}
			if p == "" {
				c.Point = "clean"
			}
			cells[[2]string{t, p}] = c
			rep.Cells = append(rep.Cells, c)
		}
	}
	if opt.Scratch == "" {
		opt.Scratch = filepath.Join(env.Dir, "own")
	}
	if err := os.MkdirAll(opt.Scratch, 0o700); err != nil {
		return nil, fmt.Errorf("simcrash: scratch dir: %w", err)
	}
	mirrorSeeds := map[uint64]bool{}
	walksMirror := slices.ContainsFunc(opt.Points, mirrorPoint)
	for i, s := range opt.Seeds {
		if walksMirror && (opt.MirrorSeeds <= 0 || i < opt.MirrorSeeds) {
			mirrorSeeds[s] = true
			rep.MirrorSeeds = append(rep.MirrorSeeds, s)
		}
	}
	pre := newPrefixes()
	var mu sync.Mutex
	done := 0
	record := func(r *Result) {
		mu.Lock()
		defer mu.Unlock()
		done++
		c := cells[[2]string{r.Tree, r.Point}]
		if r.Point == "" {
			rep.Clean++
		} else if r.Reached {
			rep.Scenarios++
		}
		if r.Point == "" || r.Reached || r.Failed() {
			c.Scenarios++
			c.Seconds += r.Elapsed
		}
		if r.Failed() {
			c.Violations++
			rep.Violations++
			rep.Failed = append(rep.Failed, r)
		}
		if opt.KeepResults {
			rep.Results = append(rep.Results, r)
		}
		rep.Processes += r.Processes
		rep.Findings += r.Findings
		rep.Resent += r.Resent
		rep.Acked += r.Acked
		rep.Effects += r.Effects
		rep.Records += r.Records
		if opt.Progress != nil {
			opt.Progress(done, r)
		}
	}
	q := newQueue()
	scripts := map[string]bool{}
	for _, seed := range opt.Seeds {
		for _, t := range opt.Trees {
			p, err := NewPlan(t, seed, "x")
			if err != nil {
				return nil, err
			}
			if sig := p.Script(); scripts[sig] {
				rep.Repeats++
				continue
			} else {
				scripts[sig] = true
			}
			q.push(Scenario{Tree: t, Seed: seed})
		}
	}
	// Clean runs first: each counts its positions, and its crash
	// scenarios join the queue.
	var wg sync.WaitGroup
	for range opt.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				sc, ok := q.pop(ctx)
				if !ok {
					return
				}
				var r *Result
				if sc.Point == "" || mirrorPoint(sc.Point) {
					r = RunOwn(ctx, opt.Scratch, sc, pre.next())
				} else {
					r = Run(ctx, env, sc, pre.next())
				}
				record(r)
				if sc.Point == "" && !r.Failed() {
					for _, p := range opt.Points {
						if mirrorPoint(p) && !mirrorSeeds[sc.Seed] {
							continue
						}
						mu.Lock()
						c := cells[[2]string{sc.Tree, p}]
						c.Positions = max(c.Positions, r.Counts[p])
						mu.Unlock()
						for at := 1; at <= r.Counts[p]; at++ {
							q.push(Scenario{Tree: sc.Tree, Seed: sc.Seed, Point: p, At: at})
						}
					}
				}
				q.done()
			}
		}()
	}
	wg.Wait()
	rep.ElapsedSec = time.Since(start).Seconds()
	return rep, ctx.Err()
}

// queue hands scenarios to the workers; a worker's scenario may add more.
type queue struct {
	mu    sync.Mutex
	cond  *sync.Cond
	items []Scenario
	busy  int // popped and not done
}

func newQueue() *queue {
	q := &queue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *queue) push(sc Scenario) {
	q.mu.Lock()
	q.items = append(q.items, sc)
	q.mu.Unlock()
	q.cond.Signal()
}

// pop waits for a scenario; false once nothing is left and nothing running
// could add any, or ctx ended.
func (q *queue) pop(ctx context.Context) (Scenario, bool) {
	stop := context.AfterFunc(ctx, func() { q.mu.Lock(); q.cond.Broadcast(); q.mu.Unlock() })
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && q.busy > 0 && ctx.Err() == nil {
		q.cond.Wait()
	}
	if len(q.items) == 0 || ctx.Err() != nil {
		return Scenario{}, false
	}
	sc := q.items[0]
	q.items = q.items[1:]
	q.busy++
	return sc, true
}

func (q *queue) done() {
	q.mu.Lock()
	q.busy--
	q.mu.Unlock()
	q.cond.Broadcast()
}

// RunOne runs one scenario by id on env.
func RunOne(ctx context.Context, env *Env, id string) (*Result, error) {
	sc, err := ParseID(id)
	if err != nil {
		return nil, err
	}
	if sc.Point == "" || mirrorPoint(sc.Point) {
		return RunOwn(ctx, filepath.Dir(env.Dir), sc, newPrefixes().next()), nil
	}
	return Run(ctx, env, sc, newPrefixes().next()), nil
}
