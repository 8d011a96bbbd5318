package index

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/logbook-agents/logbook/internal/tree"
)

// Subtree builds the lineage subtree of thread id (an id or a unique
// prefix) as tree.Assemble of Lineage and Find would, in one snapshot,
// reading of the other threads only their place in the tree: one packed
// row for every thread's parent and creation time (the outline) and the
// few spawn records the tree can learn from; the subtree's own threads,
// deliveries and child results are read for its members alone. dir is the
// data dir (problems name its mirror files).
func (q *queries) Subtree(ctx context.Context, dir, id string, opt tree.Options) (*tree.Tree, error) {
	var t *tree.Tree
	err := q.snapshot(ctx, func(c queryer) error {
		var err error
		t, err = subtreeOf(ctx, c, dir, id, opt)
		return err
	})
	return t, err
}

func subtreeOf(ctx context.Context, q queryer, dir, id string, opt tree.Options) (*tree.Tree, error) {
	problems, bad, err := lineageProblems(ctx, q, dir)
	if err != nil {
		return nil, err
	}
	outline, err := outlineOf(ctx, q)
	if err != nil {
		return nil, err
	}
	spawns, err := spawnsOf(ctx, q)
	if err != nil {
		return nil, err
	}
	// The threads that hold spawn records the tree learns from get their
	// full facts (their chain says which spawns are theirs).
	var spawners []string
	if len(spawns) > 0 {
		rollouts := make([]string, 0, len(spawns))
		for rid := range spawns {
			rollouts = append(rollouts, rid)
		}
		if spawners, err = stringsOf(ctx, q, `SELECT DISTINCT thread_id FROM rollouts WHERE rollout_id IN (SELECT value FROM json_each(?))
			AND thread_id <> ''`, jsonList(rollouts)); err != nil {
			return nil, err
		}
	}
	full, err := nodesOf(ctx, q, spawners, spawns, bad)
	if err != nil {
		return nil, err
	}
	for _, f := range full {
		if i, ok := slices.BinarySearchFunc(outline, f.ID, func(o tree.ThreadFacts, id string) int { return strings.Compare(o.ID, id) }); ok && outline[i].ID == f.ID {
			outline[i] = f
		}
	}
	fill := func(members []string) (tree.Input, error) {
		var in tree.Input
		var err error
		list := jsonList(members)
		if in.Threads, err = nodesOf(ctx, q, members, spawns, bad); err != nil {
			return in, err
		}
		if in.Deliveries, err = deliveriesWhere(ctx, q, `state <> 'confirmed' AND to_thread IN (SELECT value FROM json_each(?))`, 0, list); err != nil {
			return in, err
		}
		in.ChildResults, err = childResultsWhere(ctx, q, `cr_state <> '' AND cr_parent IN (SELECT value FROM json_each(?))`, 0, list)
		return in, err
	}
	return tree.AssembleSubtree(tree.Input{Threads: outline, Problems: problems}, id, fill, opt)
}

// outlineOf reads every thread's place in the tree, by thread id: the id,
// the parent its current rollout names, the thread its current rollout was
// forked from when it names no parent (a fork's place then), and the time
// its chain began.
func outlineOf(ctx context.Context, q queryer) ([]tree.ThreadFacts, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM threads`).Scan(&n); err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT thread_id, tree_parent, first_ts, CASE WHEN tree_parent = '' THEN
		ifnull((SELECT r.forked_from_id FROM rollouts r WHERE r.rollout_id = t.current_rollout_id), '') ELSE '' END
		FROM threads t ORDER BY thread_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]tree.ThreadFacts, 0, n)
	for rows.Next() {
		var f tree.ThreadFacts
		if err := rows.Scan(&f.ID, &f.ParentThreadID, &f.Created, &f.ForkedFromID); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// nodesOf reads the full facts of the given threads (those that are
// threads), by thread id, with their spawn records and without a view's
// counts when the view could not be read (bad).
func nodesOf(ctx context.Context, q queryer, ids []string, spawns map[string][]tree.SpawnFact, bad map[string]bool) ([]tree.ThreadFacts, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT thread_id, node FROM threads WHERE thread_id IN (SELECT value FROM json_each(?)) ORDER BY thread_id`, jsonList(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []tree.ThreadFacts
	for rows.Next() {
		var id, node string
		if err := rows.Scan(&id, &node); err != nil {
			return nil, err
		}
		f, err := decodeNode(id, node)
		if err != nil {
			return nil, err
		}
		for _, rid := range f.Rollouts {
			f.Spawns = append(f.Spawns, spawns[rid]...)
		}
		if bad[id] {
			f.InterruptedTurns, f.UnknownCalls = 0, 0
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

func stringsOf(ctx context.Context, q queryer, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func jsonList(ss []string) string {
	b, _ := json.Marshal(ss) // strings always marshal
	return string(b)
}
