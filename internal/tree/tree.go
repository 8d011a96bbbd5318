package tree

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
)

// Node statuses.
const (
	Active         = "active"          // a writer holds its lease
	Idle           = "idle"            // nothing to look at
	NeedsAttention = "needs_attention" // an interrupted turn, unknown calls or deliveries not confirmed
)

// Node is one thread in the lineage tree. Its JSON is the `coordinator tree
// --json` format.
type Node struct {
	ThreadID       string   `json:"thread_id"`
	ParentThreadID string   `json:"parent_thread_id,omitempty"`
	ForkedFromID   string   `json:"forked_from_id,omitempty"`
	RolloutID      string   `json:"rollout_id"` // current rollout; "" for a child that never wrote a line
	Rollouts       []string `json:"rollouts"`   // the revert chain, oldest first
	AgentRole      string   `json:"agent_role,omitempty"`
	Status         string   `json:"status"`
	Counts         Counts   `json:"counts"`
	// Unconfirmed counts this thread's child results that are still
	// unconfirmed: tasks it sent whose child sent no result, and results it
	// has not confirmed receiving.
	Unconfirmed int     `json:"unconfirmed"`
	Children    []*Node `json:"children"`
	created     string
}

// Counts say why a node needs attention.
type Counts struct {
	InterruptedTurns      int `json:"interrupted_turns"`
	UnknownCalls          int `json:"unknown_calls"`
	DeliveriesUnconfirmed int `json:"deliveries_not_confirmed"`
}

// Tree is the lineage of a corpus.
type Tree struct {
	Roots    []*Node   `json:"roots"`
	Orphans  []string  `json:"orphans"`
	Problems []Problem `json:"problems"`
	// Deliveries and ChildResults are the ledger's judgement.
	Deliveries   []dedupe.Delivery    `json:"-"`
	ChildResults []dedupe.ChildResult `json:"-"`
	Threads      map[string]*Thread   `json:"-"`
	nodes        map[string]*Node
}

// Options tune Build.
type Options struct {
	// Active reports whether a thread's lease is held (nil: none is; offline).
	Active func(thread string) bool
}

// Build builds the lineage tree, the delivery ledger's judgement and each
// node's status from a corpus of rollout files (Assemble over the facts the
// corpus holds). Bad input (orphans, duplicate IDs, cycles) is reported in
// Problems and Orphans, never fatal.
func Build(c *Corpus, opt Options) *Tree {
	threads := c.Threads()
	t := Assemble(c.input(threads), opt)
	t.Threads = threads
	c.Problems = t.Problems
	return t
}

// input gathers what the tree is assembled from out of a corpus and its
// threads.
func (c *Corpus) input(threads map[string]*Thread) Input {
	ledger := c.Ledger(threads)
	in := Input{Problems: c.Problems}
	in.Deliveries = ledger.Classify()
	in.ChildResults = ledger.ChildResults(in.Deliveries)
	for _, id := range sortedKeys(threads) {
		th := threads[id]
		r := th.Current
		f := ThreadFacts{ID: id, Rollouts: th.Rollouts, Current: r.ID, ParentThreadID: r.Meta.Parent(), ForkedFromID: r.Meta.ForkedFromID,
			AgentRole: r.Meta.AgentRole, Created: c.Rollouts[th.Rollouts[0]].Created}
		if st := th.State; st != nil {
			for _, turn := range st.Turns {
				if turn.Status == replay.StatusInterrupted {
					f.InterruptedTurns++
				}
			}
			f.UnknownCalls = len(st.DanglingCalls)
		}
		for _, rid := range th.Rollouts {
			for _, s := range c.Rollouts[rid].Spawns {
				f.Spawns = append(f.Spawns, SpawnFact{Child: s.Child, Role: s.Role, Updated: c.Rollouts[rid].Updated})
			}
		}
		in.Threads = append(in.Threads, f)
	}
	return in
}

// Input is what a tree is assembled from: per thread, the facts of its
// rollouts, and the delivery ledger's judgement. Build gathers it from
// rollout files; the index keeps it (index.Lineage).
type Input struct {
	Threads      []ThreadFacts // by thread id
	Deliveries   []dedupe.Delivery
	ChildResults []dedupe.ChildResult
	Problems     []Problem // found reading the rollouts; the tree's own follow
}

// ThreadFacts are what the tree needs of one thread.
type ThreadFacts struct {
	ID       string
	Rollouts []string // the revert chain, oldest first
	Current  string   // the chain's end
	// ParentThreadID, ForkedFromID and AgentRole are the current rollout's
	// (its canonical session_meta's).
	ParentThreadID, ForkedFromID, AgentRole string
	Created                                 string // timestamp of the first record of the chain's first rollout
	// InterruptedTurns (in the current view's window) and UnknownCalls
	// (dangling calls of the view) are replay's, over the current view.
	InterruptedTurns, UnknownCalls int
	// Spawns are the thread_spawned records of its rollouts, in chain and
	// record order, in effect or not.
	Spawns []SpawnFact
}

// SpawnFact is a parent's record of a child.
type SpawnFact struct {
	Child, Role string
	Updated     string // timestamp of the last record of the rollout that holds it
}

// Assemble builds the lineage tree from its facts: nodes for every thread
// and for every child only a parent names, the parent links (a conflicting
// parent is reported), each node's counts and status, then roots, orphans
// and broken cycles.
func Assemble(in Input, opt Options) *Tree {
	t := shapeOf(in)
	t.Deliveries, t.ChildResults = in.Deliveries, in.ChildResults
	t.judge(opt)
	return t
}

// shapeOf builds the nodes and links them: everything of the tree but the
// counts the ledger gives and the statuses.
func shapeOf(in Input) *Tree {
	t := &Tree{nodes: map[string]*Node{}}
	problems := append([]Problem(nil), in.Problems...)
	for _, f := range in.Threads {
		n := &Node{ThreadID: f.ID, ParentThreadID: f.ParentThreadID, created: f.Created}
		n.fill(f)
		t.nodes[f.ID] = n
	}
	// The parents' records of their children: the child may never have
	// written a line, or its own session_meta may not name the parent.
	for _, f := range in.Threads {
		for _, s := range f.Spawns {
			child, ok := t.nodes[s.Child]
			switch {
			case !ok:
				t.nodes[s.Child] = &Node{ThreadID: s.Child, ParentThreadID: f.ID, AgentRole: s.Role, Rollouts: []string{}, created: s.Updated}
			case child.ParentThreadID == "":
				child.ParentThreadID = f.ID
			case child.ParentThreadID != f.ID:
				problems = append(problems, Problem{Kind: "conflicting_parent", Thread: s.Child,
					Detail: fmt.Sprintf("thread %s names parent %s, but %s spawned it", s.Child, child.ParentThreadID, f.ID)})
			}
		}
	}
	t.Problems = t.link(problems)
	return t
}

// fill sets what a node shows of its thread's facts, but its place in the
// tree (the parent and the creation time shapeOf sets).
func (n *Node) fill(f ThreadFacts) {
	n.RolloutID, n.Rollouts, n.AgentRole, n.ForkedFromID = f.Current, f.Rollouts, f.AgentRole, f.ForkedFromID
	n.Counts = Counts{InterruptedTurns: f.InterruptedTurns, UnknownCalls: f.UnknownCalls}
}

// judge counts, for the tree's nodes, the deliveries to each that are not
// confirmed and the child results each still waits for, and sets every
// node's status.
func (t *Tree) judge(opt Options) {
	for _, d := range t.Deliveries {
		if n, ok := t.nodes[d.ToThread]; ok && d.State != dedupe.Confirmed {
			n.Counts.DeliveriesUnconfirmed++
		}
	}
	for _, cr := range t.ChildResults {
		if n, ok := t.nodes[cr.Parent]; ok {
			n.Unconfirmed++
		}
	}
	for _, n := range t.nodes {
		switch {
		case opt.Active != nil && opt.Active(n.ThreadID):
			n.Status = Active
		case n.Counts != (Counts{}) || n.Unconfirmed > 0:
			n.Status = NeedsAttention
		default:
			n.Status = Idle
		}
	}
}

// parentOf is a node's place in the tree: its spawn parent, else the thread
// it was forked from.
func parentOf(n *Node) string {
	if n.ParentThreadID != "" {
		return n.ParentThreadID
	}
	return n.ForkedFromID
}

// link attaches children to parents; orphans and nodes on a cycle become
// roots. It returns problems with the cycles it broke added.
func (t *Tree) link(problems []Problem) []Problem {
	ids := sortedKeys(t.nodes)
	cut := map[string]bool{} // nodes whose parent link a cycle broke
	// A node is settled once a walk has passed it: the rest of its way up
	// is known to end (at a root, a missing parent, a cut or a cycle now
	// cut), so a later walk that reaches it stops there, and every node is
	// walked past once.
	settled := make(map[string]bool, len(ids))
	path := map[string]int{}
	var order []string
	for _, id := range ids {
		clear(path)
		order = order[:0]
		for cur := id; cur != "" && !settled[cur]; {
			if _, seen := path[cur]; seen {
				cycle := slices.Clone(order[path[cur]:])
				sort.Strings(cycle)
				cut[cycle[0]] = true
				problems = append(problems, Problem{Kind: "cycle", Thread: cycle[0],
					Detail: fmt.Sprintf("threads %s name each other as parents; %s shown as a root", strings.Join(cycle, " -> "), cycle[0])})
				break
			}
			path[cur] = len(order)
			order = append(order, cur)
			n, ok := t.nodes[cur]
			if !ok || cut[cur] {
				break
			}
			cur = parentOf(n)
		}
		for _, n := range order {
			settled[n] = true
		}
	}
	for _, id := range ids {
		n := t.nodes[id]
		p := parentOf(n)
		switch {
		case p == "" || cut[id]:
			t.Roots = append(t.Roots, n)
		case t.nodes[p] == nil:
			t.Orphans = append(t.Orphans, id)
			t.Roots = append(t.Roots, n)
		default:
			t.nodes[p].Children = append(t.nodes[p].Children, n)
		}
	}
	for _, n := range t.nodes {
		sortNodes(n.Children)
		if n.Children == nil {
			n.Children = []*Node{}
		}
	}
	sortNodes(t.Roots)
	if t.Orphans == nil {
		t.Orphans = []string{}
	}
	return problems
}

func sortNodes(ns []*Node) {
	sort.Slice(ns, func(i, j int) bool {
		if ns[i].created != ns[j].created {
			return ns[i].created < ns[j].created
		}
		return ns[i].ThreadID < ns[j].ThreadID
	})
}

// Node returns the node of a thread, or nil.
func (t *Tree) Node(id string) *Node { return t.nodes[id] }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
