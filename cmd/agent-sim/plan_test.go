package main

import (
	"slices"
	"testing"
)

// TestPlanDeterministic: a seed gives one tree shape; depth is respected;
// thread ids parse back to their tree.
func TestPlanDeterministic(t *testing.T) {
	for _, c := range []struct{ agents, depth int }{{1, 0}, {20, 3}, {100, 2}, {1000, 3}, {50, 1}} {
		p := params{Seed: 42, Agents: c.agents, Depth: c.depth, Turn: 3, Run: "abc"}
		a, b := buildPlan(p), buildPlan(p)
		if !slices.Equal(a.threads(), b.threads()) {
			t.Fatalf("%+v: two builds differ", c)
		}
		n := len(a.threads())
		if n > c.agents || (c.depth >= 2 && n < c.agents*9/10) {
			t.Errorf("%+v: %d threads planned", c, n)
		}
		for _, th := range a.threads() {
			if a.depth[th] > c.depth {
				t.Errorf("%+v: %s at depth %d", c, th, a.depth[th])
			}
			q, _, err := parseThread(th)
			if err != nil || q != p {
				t.Errorf("%s parses to %+v, %v", th, q, err)
			}
		}
		p.Seed = 43
		if c.agents > 10 && slices.Equal(buildPlan(p).threads(), a.threads()) && c.depth > 1 {
			t.Logf("%+v: seeds 42 and 43 give the same shape", c)
		}
	}
	if _, _, err := parseThread("root"); err == nil {
		t.Error("a non-simulated id parsed")
	}
}
