package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/tree"
)

// Lineage reads, in one snapshot, what tree.Assemble builds the lineage tree
// from: every thread's chain, current rollout and counts, the spawn records,
// the deliveries not confirmed and the child results, and the problems the
// full scan of the same mirror files reports before its tree's own. dir is
// the data dir (problems name its mirror files).
func (q *queries) Lineage(ctx context.Context, dir string) (tree.Input, error) {
	var in tree.Input
	err := q.snapshot(ctx, func(c queryer) error {
		var err error
		in, err = lineageOf(ctx, c, dir)
		return err
	})
	return in, err
}

// snapshot runs f on one connection inside one read transaction.
func (q *queries) snapshot(ctx context.Context, f func(queryer) error) error {
	conn, err := q.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	return f(conn)
}

func lineageOf(ctx context.Context, q queryer, dir string) (tree.Input, error) {
	var in tree.Input
	problems, bad, err := lineageProblems(ctx, q, dir)
	if err != nil {
		return in, err
	}
	spawns, err := spawnsOf(ctx, q)
	if err != nil {
		return in, err
	}
	rows, err := q.QueryContext(ctx, `SELECT thread_id, node FROM threads ORDER BY thread_id`)
	if err != nil {
		return in, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, node string
		if err := rows.Scan(&id, &node); err != nil {
			return in, err
		}
		f, err := decodeNode(id, node)
		if err != nil {
			return in, err
		}
		for _, rid := range f.Rollouts {
			f.Spawns = append(f.Spawns, spawns[rid]...)
		}
		if bad[id] {
			f.InterruptedTurns, f.UnknownCalls = 0, 0
		}
		in.Threads = append(in.Threads, f)
	}
	if err := rows.Err(); err != nil {
		return in, err
	}
	in.Problems = problems
	in.Deliveries, err = deliveriesWhere(ctx, q, `state <> 'confirmed'`, 0)
	if err != nil {
		return in, err
	}
	in.ChildResults, err = childResultsWhere(ctx, q, `cr_state <> ''`, 0)
	return in, err
}

// lineageProblems are the problems the full scan of the mirror files
// reports before its tree's own: the single rollouts', then the threads'
// own, in thread order: the chain's, then a view that could not be read
// (bad: such a thread has no counts, as the full scan has no state).
func lineageProblems(ctx context.Context, q queryer, dir string) ([]tree.Problem, map[string]bool, error) {
	problems, err := rolloutProblems(ctx, q, dir)
	if err != nil {
		return nil, nil, err
	}
	bad := map[string]bool{}
	rows, err := q.QueryContext(ctx, `SELECT thread_id, current_rollout_id, chain_problems, base_error FROM threads
		WHERE chain_problems <> '' OR base_error <> '' ORDER BY thread_id`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, cur, chainProblems, baseErr string
		if err := rows.Scan(&id, &cur, &chainProblems, &baseErr); err != nil {
			return nil, nil, err
		}
		if chainProblems != "" {
			var ps []tree.Problem
			if err := json.Unmarshal([]byte(chainProblems), &ps); err != nil {
				return nil, nil, fmt.Errorf("index: thread %s: chain problems: %w", id, err)
			}
			problems = append(problems, ps...)
		}
		if baseErr != "" {
			bad[id] = true
			problems = append(problems, tree.Problem{Kind: "bad_base", Thread: id, Rollout: cur, Detail: baseErr})
		}
	}
	return problems, bad, rows.Err()
}

// rolloutProblems are the problems of single rollouts, in the order the
// full scan reads the mirror files (by path): records with IDs that could
// never be subject tokens (invalid_id), a rollout with no session_meta.
func rolloutProblems(ctx context.Context, q queryer, dir string) ([]tree.Problem, error) {
	type rp struct {
		path string
		ord  int64
		p    tree.Problem
	}
	var ps []rp
	rows, err := q.QueryContext(ctx, `SELECT p.rollout_id, p.ordinal, p.kind, p.detail, r.thread_id FROM problems p
		JOIN rollouts r USING (rollout_id)`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, kind, detail, thread string
		var ord int64
		if err := rows.Scan(&id, &ord, &kind, &detail, &thread); err != nil {
			rows.Close()
			return nil, err
		}
		path := mirrorName(dir, id)
		ps = append(ps, rp{path, ord, tree.Problem{Kind: kind, Thread: thread, Rollout: id,
			Detail: fmt.Sprintf("%s line %d ordinal %d: %s", path, ord, ord, detail)}})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = q.QueryContext(ctx, `SELECT rollout_id FROM rollouts WHERE thread_id = ''`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		path := mirrorName(dir, id)
		ps = append(ps, rp{path, 0, tree.Problem{Kind: "unreadable", Detail: fmt.Sprintf("%s: %v", path, rollout.ErrNoSessionMeta)}})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].path != ps[j].path {
			return ps[i].path < ps[j].path
		}
		return ps[i].ord < ps[j].ord
	})
	out := make([]tree.Problem, len(ps))
	for i, p := range ps {
		out[i] = p.p
	}
	return out, nil
}

// mirrorName is the path the full scan names a rollout's mirror file by.
func mirrorName(dir, id string) string {
	if p := datadir.MirrorPath(dir, id); p != "" {
		return p
	}
	return datadir.RolloutsDir(dir) + "/" + id + datadir.JSONLExt
}

// spawnsOf returns every rollout's thread_spawned records, in record order,
// but the redundant ones (edges.redundant: the child's own current
// session_meta names the same parent, and tree.Assemble does nothing with
// those), which are most of a big tree's edges.
func spawnsOf(ctx context.Context, q queryer) (map[string][]tree.SpawnFact, error) {
	rows, err := q.QueryContext(ctx, `SELECT e.rollout_id, e.child_thread_id, e.agent_role,
		(SELECT r.last_ts FROM rollouts r WHERE r.rollout_id = e.rollout_id) FROM edges e
		WHERE e.evidence = 'thread_spawned' AND e.redundant = 0 AND e.ordinal > 0 ORDER BY e.rollout_id, e.ordinal`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]tree.SpawnFact{}
	for rows.Next() {
		var id string
		var s tree.SpawnFact
		if err := rows.Scan(&id, &s.Child, &s.Role, &s.Updated); err != nil {
			return nil, err
		}
		out[id] = append(out[id], s)
	}
	return out, rows.Err()
}

const deliveryCols = `msg_id, to_thread, idempotency_key, from_thread, kind, in_reply_to, state, reason, sends, receipts, receipts_in_effect`

func scanDelivery(rows *sql.Rows) (dedupe.Delivery, error) {
	var d dedupe.Delivery
	err := rows.Scan(&d.MsgID, &d.ToThread, &d.IdempotencyKey, &d.FromThread, &d.Kind, &d.InReplyTo, &d.State, &d.Reason,
		&d.Sends, &d.Receipts, &d.InEffect)
	return d, err
}

// deliveriesWhere returns the deliveries a condition keeps, by msg_id and
// receiver, at most limit of them (0: all).
func deliveriesWhere(ctx context.Context, q queryer, where string, limit int, args ...any) ([]dedupe.Delivery, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE `+where+` ORDER BY msg_id, to_thread`+limitSQL(limit), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dedupe.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func limitSQL(limit int) string {
	if limit <= 0 {
		return ""
	}
	return fmt.Sprintf(" LIMIT %d", limit)
}

const childResultCols = `cr_task, cr_result, cr_parent, cr_child, cr_state, cr_reason`

// childResultsWhere returns the child results a condition keeps, by task,
// result, parent and child, at most limit of them (0: all).
func childResultsWhere(ctx context.Context, q queryer, where string, limit int, args ...any) ([]dedupe.ChildResult, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+childResultCols+` FROM deliveries WHERE `+where+`
		ORDER BY cr_task, cr_result, cr_parent, cr_child`+limitSQL(limit), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dedupe.ChildResult
	for rows.Next() {
		var c dedupe.ChildResult
		if err := rows.Scan(&c.TaskMsgID, &c.ResultMsgID, &c.Parent, &c.Child, &c.State, &c.Reason); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
