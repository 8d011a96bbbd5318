package simcrash

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

// Trees the enumeration scripts.
const (
	// TreeSpawn: a driver D whose root r spawns two children a and b; a
	// spawns a grandchild g. Each works, and answers its parent once its
	// own children answered.
	TreeSpawn = "tree"
	// TreeFork: D's root r works and answers; then the operator forks r
	// after one of its turns (by copy or by reference) into f, and D sends
	// f a task of its own, which f works on from the forked history.
	TreeFork = "fork"
	// TreeRevert: D's root P (a paginated thread) works three turns and
	// answers; the operator reverts P to before its third turn and D asks
	// it to redo from there: two other turns, another answer. The third
	// turn's effects stay done in the world.
	TreeRevert = "revert"
	// TreeResend: D's root r spawns c and later sends c's task again
	// under the same idempotency key (a new msg id): c must tell the
	// repeat and do the work once.
	TreeResend = "resend"
)

// Trees lists every tree, in table order.
var Trees = []string{TreeSpawn, TreeFork, TreeRevert, TreeResend}

// node is one planned thread.
type node struct {
	ID       string
	Name     string   // its name in the tree: D, r, a, g ...
	Parent   string   // spawn parent ("" for D and a fork)
	Children []string // spawned, in order
	// Calls[n-1] is how many keyed calls turn n makes. Work turns come
	// first, then (with children) one last turn once every child
	// answered.
	Calls     []int
	Work      int // work turns before the children are spawned
	Paginated bool
	ResendTo  string // re-send this child's task once, after spawning it
	// Redo (revert tree) is plan B's calls per turn, after a redo message:
	// turns RedoFrom .. RedoFrom+len(Redo)-1 (named <n>b).
	Redo     []int
	RedoFrom int
	// Base is the turn count the node's own turns start from (a fork
	// inherits its source's turns).
	Base int
}

// Plan is one scripted tree for one seed: its threads, what each does and
// what the end must look like.
type Plan struct {
	Tree   string
	Seed   uint64
	Prefix string
	D      string
	Nodes  map[string]*node
	// Order is the order a process visits runnable threads (seeded).
	Order []string
	// Fork: the source, the turn after which it is forked, the mode.
	ForkOf    string
	ForkAfter int
	ForkMode  string
	Fork      string
	// Revert: the thread and the turn before which it is reverted.
	RevertOf     string
	RevertBefore int
}

// key names a call's effect in the world: thread, turn, call index.
func key(thread, turn string, j int) string { return fmt.Sprintf("%s-t%s-c%d", thread, turn, j) }

// NewPlan scripts tree for seed; prefix makes every id unique.
func NewPlan(tree string, seed uint64, prefix string) (*Plan, error) {
	rng := rand.New(rand.NewPCG(seed, 0x656e756d))
	p := &Plan{Tree: tree, Seed: seed, Prefix: prefix, Nodes: map[string]*node{}}
	id := func(name string) string { return prefix + "-" + name }
	p.D = id("D")
	add := func(n *node) *node {
		n.ID = id(n.Name)
		p.Nodes[n.ID] = n
		return n
	}
	calls := func(turns int) []int {
		out := make([]int, turns)
		for i := range out {
			out[i] = 1 + rng.IntN(2)
		}
		return out
	}
	work := func(n int) int { return 1 + rng.IntN(n) }
	d := add(&node{Name: "D"})
	switch tree {
	case TreeSpawn:
		r := add(&node{Name: "r", Parent: d.ID})
		a := add(&node{Name: "a", Parent: r.ID})
		b := add(&node{Name: "b", Parent: r.ID})
		g := add(&node{Name: "g", Parent: a.ID})
		d.Children = []string{r.ID}
		r.Children = []string{a.ID, b.ID}
		if rng.IntN(2) == 0 {
			r.Children = []string{b.ID, a.ID}
		}
		a.Children = []string{g.ID}
		r.Work, a.Work, b.Work, g.Work = work(2), work(2), work(2), work(2)
		r.Calls, a.Calls = calls(r.Work+1), calls(a.Work+1)
		b.Calls, g.Calls = calls(b.Work), calls(g.Work)
	case TreeFork:
		r := add(&node{Name: "r", Parent: d.ID, Work: 2 + rng.IntN(3)})
		r.Calls = calls(r.Work)
		d.Children = []string{r.ID}
		p.ForkOf, p.ForkAfter = r.ID, 1+rng.IntN(r.Work-1)
		p.ForkMode = []string{"copy", "reference"}[rng.IntN(2)]
		f := add(&node{Name: "f", Work: work(3), Base: p.ForkAfter})
		f.Calls = calls(f.Work)
		p.Fork = f.ID
	case TreeRevert:
		pg := add(&node{Name: "P", Parent: d.ID, Work: 3 + rng.IntN(2), Paginated: true})
		pg.Calls = calls(pg.Work)
		p.RevertOf, p.RevertBefore = pg.ID, 2+rng.IntN(pg.Work-1)
		pg.Redo, pg.RedoFrom = calls(work(2)), p.RevertBefore
		d.Children = []string{pg.ID}
	case TreeResend:
		r := add(&node{Name: "r", Parent: d.ID, Work: work(3)})
		c := add(&node{Name: "c", Parent: r.ID, Work: work(3)})
		d.Children = []string{r.ID}
		r.Children = []string{c.ID}
		r.ResendTo = c.ID
		r.Calls, c.Calls = calls(r.Work+1), calls(c.Work)
	default:
		return nil, fmt.Errorf("simcrash: unknown tree %q (want one of %v)", tree, Trees)
	}
	for _, n := range p.Nodes {
		if n.Name != "D" {
			p.Order = append(p.Order, n.ID)
		}
	}
	sort.Strings(p.Order)
	rng.Shuffle(len(p.Order), func(i, j int) { p.Order[i], p.Order[j] = p.Order[j], p.Order[i] })
	p.Order = append([]string{p.D}, p.Order...)
	return p, nil
}

// Script is the plan without its ids: two seeds with the same script run
// the same scenarios, and count once.
func (p *Plan) Script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s fork:%s/%d/%s revert:%s/%d order:", p.Tree, short(p.ForkOf), p.ForkAfter, p.ForkMode, short(p.RevertOf), p.RevertBefore)
	for _, id := range p.Order {
		b.WriteString(short(id) + ",")
	}
	names := make([]string, 0, len(p.Nodes))
	for id := range p.Nodes {
		names = append(names, id)
	}
	sort.Strings(names)
	for _, id := range names {
		n := p.Nodes[id]
		fmt.Fprintf(&b, " %s<%s w%d b%d c%v redo%v@%d resend:%s kids:", n.Name, short(n.Parent), n.Work, n.Base, n.Calls, n.Redo, n.RedoFrom, short(n.ResendTo))
		for _, c := range n.Children {
			b.WriteString(short(c) + ",")
		}
	}
	return b.String()
}

// Keys are the effects the tree must have carried out, each exactly once,
// whatever crashed.
func (p *Plan) Keys() []string {
	var out []string
	for _, n := range p.Nodes {
		for i, c := range n.Calls {
			for j := range c {
				out = append(out, key(n.ID, fmt.Sprint(n.Base+i+1), j))
			}
		}
		for i, c := range n.Redo {
			for j := range c {
				out = append(out, key(n.ID, fmt.Sprintf("%db", n.RedoFrom+i), j))
			}
		}
	}
	sort.Strings(out)
	return out
}
