package tree

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// outlineOf keeps of each thread only what AssembleSubtree says an outline
// needs; spawns and forks can be dropped to build mutants.
func outlineOf(in Input, spawns, forks bool) Input {
	out := Input{Problems: in.Problems}
	for _, f := range in.Threads {
		o := ThreadFacts{ID: f.ID, ParentThreadID: f.ParentThreadID, Created: f.Created}
		if spawns {
			o.Spawns = f.Spawns
		}
		if forks && f.ParentThreadID == "" {
			o.ForkedFromID = f.ForkedFromID
		}
		out.Threads = append(out.Threads, o)
	}
	return out
}

// fillFrom answers only for the members: their facts, deliveries to them
// and their child results, and records what it was asked.
func fillFrom(in Input, asked *[]string) Fill {
	return func(members []string) (Input, error) {
		*asked = members
		var out Input
		for _, f := range in.Threads {
			if slices.Contains(members, f.ID) {
				out.Threads = append(out.Threads, f)
			}
		}
		for _, d := range in.Deliveries {
			if slices.Contains(members, d.ToThread) {
				out.Deliveries = append(out.Deliveries, d)
			}
		}
		for _, cr := range in.ChildResults {
			if slices.Contains(members, cr.Parent) {
				out.ChildResults = append(out.ChildResults, cr)
			}
		}
		return out, nil
	}
}

func subtreeJSON(t *testing.T, roots []*Node, orphans []string, problems []Problem) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Roots    []*Node
		Orphans  []string
		Problems []Problem
	}{roots, orphans, problems})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func countNodes(n *Node) int {
	c := 1
	for _, ch := range n.Children {
		c += countNodes(ch)
	}
	return c
}

// TestAssembleSubtreeIsFindOfTheWholeTree: for every node of the rich
// corpus (cycles, orphans, conflicting parents, children that never wrote
// a line, forks, reverts, every delivery state), the subtree assembled from
// the outline and its members' facts is the node Find picks from the whole
// tree, with the whole tree's orphans and problems, and fill is asked for
// exactly the subtree's members. Outlines without spawns or without forks
// are caught: the corpus needs both to be shaped right.
func TestAssembleSubtreeIsFindOfTheWholeTree(t *testing.T) {
	c, err := LoadDir(richCorpus(t))
	if err != nil {
		t.Fatal(err)
	}
	in := c.input(c.Threads())
	active := func(id string) bool { return id == "P" }
	whole := Assemble(in, Options{Active: active})
	mutants := map[string]int{}
	for _, id := range sortedKeys(whole.nodes) {
		want := whole.nodes[id]
		var asked []string
		sub, err := AssembleSubtree(outlineOf(in, true, true), id, fillFrom(in, &asked), Options{Active: active})
		if err != nil {
			t.Fatalf("subtree %s: %v", id, err)
		}
		if got, w := subtreeJSON(t, sub.Roots, sub.Orphans, sub.Problems), subtreeJSON(t, []*Node{want}, whole.Orphans, whole.Problems); got != w {
			t.Fatalf("subtree %s differs from the whole tree's:\n got %s\nwant %s", id, got, w)
		}
		if len(asked) != countNodes(want) || len(sub.nodes) != len(asked) {
			t.Fatalf("subtree %s: fill asked for %d members, the subtree has %d nodes", id, len(asked), countNodes(want))
		}
		for name, o := range map[string]Input{"without spawns": outlineOf(in, false, true), "without forks": outlineOf(in, true, false)} {
			m, err := AssembleSubtree(o, id, fillFrom(in, &asked), Options{Active: active})
			if err != nil || subtreeJSON(t, m.Roots, m.Orphans, m.Problems) != subtreeJSON(t, []*Node{want}, whole.Orphans, whole.Problems) {
				mutants[name]++
			}
		}
	}
	for _, name := range []string{"without spawns", "without forks"} {
		if mutants[name] == 0 {
			t.Errorf("an outline %s gave every subtree right: the corpus does not test it", name)
		}
	}
	if len(whole.Orphans) == 0 || !slices.ContainsFunc(whole.Problems, func(p Problem) bool { return p.Kind == "cycle" }) {
		t.Errorf("the corpus has no orphan or no cycle: orphans %v", whole.Orphans)
	}
}

func TestAssembleSubtreeUnknownOrAmbiguous(t *testing.T) {
	in := Input{Threads: []ThreadFacts{{ID: "abc1"}, {ID: "abc2"}}}
	never := func([]string) (Input, error) { t.Fatal("fill asked for an unknown subtree"); return Input{}, nil }
	if _, err := AssembleSubtree(in, "zzz", never, Options{}); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("unknown thread: %v", err)
	}
	if _, err := AssembleSubtree(in, "abc", never, Options{}); !errors.Is(err, ErrAmbiguousThread) {
		t.Errorf("ambiguous prefix: %v", err)
	}
	boom := errors.New("boom")
	if _, err := AssembleSubtree(in, "abc1", func([]string) (Input, error) { return Input{}, boom }, Options{}); !errors.Is(err, boom) {
		t.Errorf("fill's error: %v", err)
	}
}

// naiveCycles is link's cycle rule walked from every node to its end, with
// nothing remembered between walks: the reference the settled walk must
// match.
func naiveCycles(nodes map[string]*Node) []Problem {
	var problems []Problem
	cut := map[string]bool{}
	for _, id := range sortedKeys(nodes) {
		path := map[string]int{}
		var order []string
		for cur := id; cur != ""; {
			if _, seen := path[cur]; seen {
				cycle := slices.Clone(order[path[cur]:])
				sort.Strings(cycle)
				if !cut[cycle[0]] {
					cut[cycle[0]] = true
					problems = append(problems, Problem{Kind: "cycle", Thread: cycle[0],
						Detail: fmt.Sprintf("threads %s name each other as parents; %s shown as a root", strings.Join(cycle, " -> "), cycle[0])})
				}
				break
			}
			path[cur] = len(order)
			order = append(order, cur)
			n, ok := nodes[cur]
			if !ok || cut[cur] {
				break
			}
			cur = parentOf(n)
		}
	}
	return problems
}

// TestLinkCyclesAsTheNaiveWalk: on random parent graphs (self-loops,
// cycles with tails, missing parents, forks), link breaks the same cycles,
// in the same order, as walking every node to its end would.
func TestLinkCyclesAsTheNaiveWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	cycles := 0
	for round := 0; round < 2000; round++ {
		n := 1 + rng.IntN(12)
		var in Input
		for i := 0; i < n; i++ {
			f := ThreadFacts{ID: fmt.Sprintf("t%02d", rng.IntN(20))}
			pick := func() string {
				if rng.IntN(5) == 0 {
					return ""
				}
				return fmt.Sprintf("t%02d", rng.IntN(20))
			}
			if rng.IntN(4) == 0 {
				f.ForkedFromID = pick()
			} else {
				f.ParentThreadID = pick()
			}
			if slices.ContainsFunc(in.Threads, func(o ThreadFacts) bool { return o.ID == f.ID }) {
				continue
			}
			in.Threads = append(in.Threads, f)
		}
		ref := shapeOf(Input{}) // nodes only, unlinked
		for _, f := range in.Threads {
			ref.nodes[f.ID] = &Node{ThreadID: f.ID, ParentThreadID: f.ParentThreadID, ForkedFromID: f.ForkedFromID}
		}
		want := naiveCycles(ref.nodes)
		got := shapeOf(in).Problems
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d, threads %+v:\n got %v\nwant %v", round, in.Threads, got, want)
		}
		cycles += len(want)
	}
	if cycles < 100 {
		t.Fatalf("only %d cycles in 2,000 random graphs", cycles)
	}
}
