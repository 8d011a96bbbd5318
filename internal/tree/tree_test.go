package tree

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/rollout"
)

func problemKinds(t *Tree) map[string]int {
	out := map[string]int{}
	for _, p := range t.Problems {
		out[p.Kind]++
	}
	return out
}

// TestTreeEdges: spawn edges from both sides, fork edges, Codex's structured
// source, a child that never wrote a line, revert chains.
func TestTreeEdges(t *testing.T) {
	s := newScene(t)
	root := s.thread("R", "rR", rollout.SessionMeta{}).turn("r1").spawn("A").spawn("Ghost").done("r1").write()
	// A names its parent the Codex way only.
	s.thread("A", "rA", rollout.SessionMeta{Source: rollout.Source{Kind: "subagent", ParentThreadID: "R",
		Raw: []byte(`{"subagent":{"thread_spawn":{"parent_thread_id":"R","depth":1}}}`)}}).turn("a1").done("a1").write()
	// B is spawned by R without R's record of it.
	s.thread("B", "rB", rollout.SessionMeta{ParentThreadID: "R"}).turn("b1").write()
	s.forkRef("F", "rF", root, 3).turn("f1").done("f1").write()
	tr := s.build()
	if len(tr.Roots) != 1 || tr.Roots[0].ThreadID != "R" {
		t.Errorf("roots: %v, want [R]", ids(tr.Roots))
	}
	r := tr.Node("R")
	kids := ids(r.Children)
	want := []string{"A", "Ghost", "B", "F"} // F: forked from R
	if len(kids) != 4 {
		t.Fatalf("R's children %v, want %v", kids, want)
	}
	for _, k := range want {
		if tr.Node(k) == nil || parentOf(tr.Node(k)) != "R" {
			t.Errorf("%s is not under R", k)
		}
	}
	if g := tr.Node("Ghost"); g.RolloutID != "" || g.Status != Idle {
		t.Errorf("a spawned child that never wrote a line: %+v", g)
	}
	if b := tr.Node("B"); b.Status != NeedsAttention || b.Counts.InterruptedTurns != 1 {
		t.Errorf("B ends mid-turn: %+v", b)
	}
	if f := tr.Node("F"); f.ForkedFromID != "R" || parentOf(f) != "R" {
		t.Errorf("F forked from R: %+v", f)
	}
	if len(tr.Orphans) != 0 || len(tr.Problems) != 0 {
		t.Errorf("orphans %v problems %+v", tr.Orphans, tr.Problems)
	}
}

// TestTreeBadInput: orphans, duplicate thread IDs, parent cycles and
// unreadable files are reported and the tree is still built.
func TestTreeBadInput(t *testing.T) {
	s := newScene(t)
	s.thread("O", "rO", rollout.SessionMeta{ParentThreadID: "Nowhere"}).turn("o1").done("o1").write()
	s.thread("X", "rX", rollout.SessionMeta{ParentThreadID: "Y"}).write()
	s.thread("Y", "rY", rollout.SessionMeta{ParentThreadID: "X"}).write()
	s.thread("D", "rD1", rollout.SessionMeta{}).turn("d1").done("d1").write()
	s.thread("D", "rD2", rollout.SessionMeta{}).turn("d2").done("d2").turn("d3").done("d3").write()
	if err := os.WriteFile(filepath.Join(s.dir, "junk.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := s.build()
	if len(tr.Orphans) != 1 || tr.Orphans[0] != "O" {
		t.Errorf("orphans %v, want [O]", tr.Orphans)
	}
	kinds := problemKinds(tr)
	for _, k := range []string{"cycle", "duplicate_thread", "unreadable"} {
		if kinds[k] != 1 {
			t.Errorf("%d %s problems, want 1: %+v", kinds[k], k, tr.Problems)
		}
	}
	if n := tr.Node("D"); n == nil || n.RolloutID != "rD2" {
		t.Errorf("duplicate thread D: the newest rollout should be current: %+v", n)
	}
	seen := 0
	var walk func(ns []*Node)
	walk = func(ns []*Node) {
		for _, n := range ns {
			seen++
			walk(n.Children)
		}
	}
	walk(tr.Roots)
	if seen != 4 { // O, X, Y, D
		t.Errorf("%d nodes reachable from the roots, want 4", seen)
	}
}

// TestRebuiltTreeIsTheSame: reading the same rollouts again gives the same
// IDs, edges and rollout chains.
func TestRebuiltTreeIsTheSame(t *testing.T) {
	s := newScene(t)
	p := s.thread("P", "rP", rollout.SessionMeta{}).turn("p1").spawn("C").done("p1").write()
	c := s.thread("C", "rC1", rollout.SessionMeta{ParentThreadID: "P", HistoryMode: rollout.HistoryPaginated}).turn("c1").done("c1").turn("c2").done("c2")
	s.revert(c, "rC2", 5).turn("c3").done("c3").write()
	c.write()
	s.forkCopy("F", "rF", p, len(p.recs)).write()
	a, b := s.build(), s.build()
	if got, want := shape(a.Roots), shape(b.Roots); got != want {
		t.Errorf("rebuilt tree differs:\n%s\n%s", got, want)
	}
	if n := a.Node("C"); len(n.Rollouts) != 2 || n.Rollouts[0] != "rC1" || n.RolloutID != "rC2" {
		t.Errorf("revert chain of C: %+v", n)
	}
}

func ids(ns []*Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ThreadID)
	}
	return out
}

func shape(ns []*Node) string {
	out := ""
	for _, n := range ns {
		out += n.ThreadID + "<" + n.RolloutID + "|"
		for _, r := range n.Rollouts {
			out += r + ","
		}
		out += ">(" + shape(n.Children) + ")"
	}
	return out
}
