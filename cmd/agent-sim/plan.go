package main

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// A simulated tree is named by its root thread's id, which carries every
// parameter: s<seed>n<agents>d<depth>t<turns>x<run>. A child's id is its
// parent's plus -<index>. Any thread can rebuild the whole plan from its own
// id, so a worker needs nothing but the thread it was offered (a task body
// lost to a crash loses nothing).
type params struct {
	Seed                uint64
	Agents, Depth, Turn int
	Run                 string
}

func (p params) rootID() string {
	return fmt.Sprintf("s%dn%dd%dt%dx%s", p.Seed, p.Agents, p.Depth, p.Turn, p.Run)
}

// parseThread splits a simulated thread id into its tree's parameters and
// its path from the root.
func parseThread(id string) (params, []int, error) {
	parts := strings.Split(id, "-")
	var p params
	head := parts[0]
	var runPart string
	if i := strings.IndexByte(head, 'x'); i >= 0 {
		head, runPart = head[:i], head[i+1:]
	}
	if _, err := fmt.Sscanf(head, "s%dn%dd%dt%d", &p.Seed, &p.Agents, &p.Depth, &p.Turn); err != nil || runPart == "" {
		return p, nil, fmt.Errorf("thread %q is not a simulated thread (want s<seed>n<agents>d<depth>t<turns>x<run>[-<i>...])", id)
	}
	p.Run = runPart
	path := make([]int, 0, len(parts)-1)
	for _, s := range parts[1:] {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return p, nil, fmt.Errorf("thread %q: bad path element %q", id, s)
		}
		path = append(path, n)
	}
	return p, path, nil
}

// plan is a tree's shape: each thread's children.
type plan struct {
	root     string
	children map[string][]string
	depth    map[string]int
}

// buildPlan grows the tree breadth first from the seed: each thread above
// the depth limit gets about f children (f-1 to f+1, f the least fanout
// whose full tree of that depth holds the agent count) until the count is
// reached (fewer threads when the depth limit is reached first).
func buildPlan(p params) *plan {
	rng := rand.New(rand.NewPCG(p.Seed, 0x6c6f67626f6f6b))
	pl := &plan{root: p.rootID(), children: map[string][]string{}, depth: map[string]int{}}
	pl.depth[pl.root] = 0
	queue := []string{pl.root}
	count := 1
	fanout := 1 // the least fanout whose full tree of depth Depth holds Agents threads
	for full := 0; p.Depth > 0 && full < p.Agents; fanout++ {
		full, level := 1, 1
		for range p.Depth {
			level *= fanout + 1
			full += level
		}
		if full >= p.Agents {
			fanout++
			break
		}
	}
	for count < p.Agents && len(queue) > 0 {
		th := queue[0]
		queue = queue[1:]
		if pl.depth[th] >= p.Depth {
			continue
		}
		k := min(fanout-1+rng.IntN(3), p.Agents-count)
		k = max(k, 1)
		for i := range k {
			c := fmt.Sprintf("%s-%d", th, i)
			pl.children[th] = append(pl.children[th], c)
			pl.depth[c] = pl.depth[th] + 1
			queue = append(queue, c)
		}
		count += k
	}
	return pl
}

// threads lists every thread of the plan, root first.
func (pl *plan) threads() []string {
	out := []string{pl.root}
	for i := 0; i < len(out); i++ {
		out = append(out, pl.children[out[i]]...)
	}
	return out
}

var plans sync.Map // root id -> *plan

// planOf returns the plan of the tree a thread belongs to.
func planOf(thread string) (*plan, error) {
	p, _, err := parseThread(thread)
	if err != nil {
		return nil, err
	}
	var pl *plan
	if v, ok := plans.Load(p.rootID()); ok {
		pl = v.(*plan)
	} else {
		pl = buildPlan(p)
		plans.Store(p.rootID(), pl)
	}
	if _, ok := pl.depth[thread]; !ok {
		return nil, fmt.Errorf("thread %q is not in the plan of %s", thread, p.rootID())
	}
	return pl, nil
}

// rngFor is the deterministic random source of one turn of one thread: the
// same seed gives the same turns wherever and however often they run.
func rngFor(p params, path []int, turn int, salt string) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%v|%d|%s", path, turn, salt)
	return rand.New(rand.NewPCG(p.Seed, h.Sum64()))
}
