package tree

import (
	"fmt"
	"sort"
)

// Link is one rollout as the revert-chain rule sees it.
type Link struct {
	ID        string
	Successor string // rollout_sealed's successor; "" when not sealed
	Updated   string // timestamp of its last record
}

// Chain orders a thread's rollouts along rollout_sealed successors and picks
// the current one: the end of the chain. lookup finds any rollout by id (a
// successor is followed wherever it is). Rollouts outside any chain make a
// duplicate_thread problem and the newest chain end (by Updated) wins; a
// successor that is not there, a missing_successor problem; successors in a
// circle, a cycle problem. It is the one statement of the rule: the full
// scan and the index both call it.
func Chain(thread string, rs []Link, lookup func(id string) (Link, bool)) (ids []string, current string, problems []Problem) {
	isSuccessor := map[string]bool{}
	for _, r := range rs {
		if r.Successor != "" {
			isSuccessor[r.Successor] = true
		}
	}
	var heads []Link
	for _, r := range rs {
		if !isSuccessor[r.ID] {
			heads = append(heads, r)
		}
	}
	if len(heads) == 0 { // a cycle of successors: start anywhere
		heads = rs[:1]
		problems = append(problems, Problem{Kind: "cycle", Thread: thread, Detail: "rollout_sealed successors form a cycle"})
	}
	type run struct {
		ids  []string
		last Link
	}
	var runs []run
	for _, h := range heads {
		var ids []string
		seen := map[string]bool{}
		last := h
		for r, ok := h, true; ok && !seen[r.ID]; r, ok = lookup(r.Successor) {
			seen[r.ID] = true
			ids = append(ids, r.ID)
			last = r
			if r.Successor == "" {
				break
			}
			if _, there := lookup(r.Successor); !there {
				// Sealed, but its successor is not here (not mirrored yet, or
				// lost): the sealed rollout stays current as far as we know.
				problems = append(problems, Problem{Kind: "missing_successor", Thread: thread, Rollout: r.ID,
					Detail: fmt.Sprintf("rollout %s is sealed in favour of %s, which is not here", r.ID, r.Successor)})
			}
		}
		runs = append(runs, run{ids, last})
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].last.Updated > runs[j].last.Updated })
	if len(runs) > 1 {
		var others []string
		for _, r := range runs[1:] {
			others = append(others, r.ids...)
		}
		problems = append(problems, Problem{Kind: "duplicate_thread", Thread: thread,
			Detail: fmt.Sprintf("thread %s has unrelated rollouts %v besides %v; the newest was taken as current", thread, others, runs[0].ids)})
	}
	return runs[0].ids, runs[0].last.ID, problems
}
