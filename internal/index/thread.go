package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/logbook-agents/logbook/internal/tree"
)

// refreshThread recomputes a thread's row from its rollouts' rows (or deletes
// it when none is left):
//
//   - identity (parent, fork origin, source, agent role) from its oldest
//     rollout, where the thread began;
//   - title and first message from the oldest rollout that has one;
//   - created_at the earliest record timestamp, updated_at the latest;
//   - the revert chain and the current rollout by tree.Chain (along
//     rollout_sealed successors; the newest chain end when there are
//     several, a problem kept in chain_problems); model, cwd and status
//     (its last turn's) from the current rollout, model from the newest
//     rollout that has one when it has none.
//
// When the current rollout changes, every receipt of the thread changes
// effect: their msg ids are added to touched.
func refreshThread(ctx context.Context, tx queryer, thread string, touched map[string]bool) error {
	rows, err := tx.QueryContext(ctx, `SELECT rollout_id, parent_thread_id, forked_from_id, source, agent_role, title, first_message,
		model, cwd, status, created_at, updated_at, sealed_by, first_ts, last_ts, base_error, interrupted, open_calls
		FROM rollouts WHERE thread_id = ? ORDER BY created_at, rollout_id`, thread)
	if err != nil {
		return err
	}
	type ro struct {
		id, parent, forked, source, role, title, first, model, cwd, status, created, updated, sealed, firstTS, lastTS, baseErr string
		interrupted, openCalls                                                                                                 int
	}
	var rs []ro
	byID := map[string]int{}
	for rows.Next() {
		var r ro
		if err := rows.Scan(&r.id, &r.parent, &r.forked, &r.source, &r.role, &r.title, &r.first, &r.model, &r.cwd, &r.status,
			&r.created, &r.updated, &r.sealed, &r.firstTS, &r.lastTS, &r.baseErr, &r.interrupted, &r.openCalls); err != nil {
			rows.Close()
			return err
		}
		byID[r.id] = len(rs)
		rs = append(rs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var oldCur, oldParent string
	err = tx.QueryRowContext(ctx, `SELECT current_rollout_id, tree_parent FROM threads WHERE thread_id = ?`, thread).Scan(&oldCur, &oldParent)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if len(rs) == 0 {
		if oldCur != "" {
			if err := touchReceipts(ctx, tx, thread, touched); err != nil {
				return err
			}
		}
		if err := markSpawns(ctx, tx, thread, oldParent, ""); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM threads WHERE thread_id = ?`, thread)
		return err
	}
	links := make([]tree.Link, len(rs))
	for i, r := range rs {
		links[i] = tree.Link{ID: r.id, Successor: r.sealed, Updated: r.lastTS}
	}
	var lerr error
	chain, curID, problems := tree.Chain(thread, sortedLinks(links), func(id string) (tree.Link, bool) {
		if i, ok := byID[id]; ok {
			return links[i], true
		}
		l := tree.Link{ID: id}
		err := tx.QueryRowContext(ctx, `SELECT sealed_by, last_ts FROM rollouts WHERE rollout_id = ? AND thread_id <> ''`, id).Scan(&l.Successor, &l.Updated)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			lerr = err
		}
		return l, err == nil
	})
	if lerr != nil {
		return lerr
	}
	first, cur := rs[0], rs[0]
	if i, ok := byID[curID]; ok {
		cur = rs[i]
	}
	t := Thread{ID: thread, ParentThreadID: first.parent, ForkedFromID: first.forked, Source: first.source, AgentRole: first.role,
		Model: cur.model, Cwd: cur.cwd, Status: cur.status, CurrentRolloutID: cur.id, Rollouts: len(rs)}
	for _, r := range rs {
		if t.Title == "" && t.FirstMessage == "" {
			t.Title, t.FirstMessage = r.title, r.first
		}
		if r.created != "" && (t.CreatedAt == "" || r.created < t.CreatedAt) {
			t.CreatedAt = r.created
		}
		t.UpdatedAt = max(t.UpdatedAt, r.updated)
	}
	for i := len(rs) - 1; i >= 0 && t.Model == ""; i-- {
		t.Model = rs[i].model
	}
	var firstTS string
	if i, ok := byID[chain[0]]; ok {
		firstTS = rs[i].firstTS
	}
	probs := ""
	if len(problems) > 0 {
		b, err := json.Marshal(problems)
		if err != nil {
			return err
		}
		probs = string(b)
	}
	if err := markSpawns(ctx, tx, thread, oldParent, cur.parent); err != nil {
		return err
	}
	// A new thread's receipts are all in this batch, touched already.
	if oldCur != t.CurrentRolloutID && oldCur != "" {
		if err := touchReceipts(ctx, tx, thread, touched); err != nil {
			return err
		}
	}
	node := tree.ThreadFacts{Rollouts: chain, Current: cur.id, ParentThreadID: cur.parent, ForkedFromID: cur.forked, AgentRole: cur.role,
		Created: firstTS, InterruptedTurns: cur.interrupted, UnknownCalls: cur.openCalls}
	_, err = tx.ExecContext(ctx, `INSERT INTO threads (thread_id, parent_thread_id, forked_from_id, source, agent_role, title,
		first_message, model, cwd, created_at, updated_at, status, current_rollout_id, rollouts, chain, chain_problems, first_ts,
		base_error, tree_parent, node)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (thread_id) DO UPDATE SET parent_thread_id = excluded.parent_thread_id, forked_from_id = excluded.forked_from_id,
		source = excluded.source, agent_role = excluded.agent_role, title = excluded.title, first_message = excluded.first_message,
		model = excluded.model, cwd = excluded.cwd, created_at = excluded.created_at, updated_at = excluded.updated_at,
		status = excluded.status, current_rollout_id = excluded.current_rollout_id, rollouts = excluded.rollouts,
		chain = excluded.chain, chain_problems = excluded.chain_problems, first_ts = excluded.first_ts,
		base_error = excluded.base_error, tree_parent = excluded.tree_parent, node = excluded.node`,
		t.ID, t.ParentThreadID, t.ForkedFromID, t.Source, t.AgentRole, t.Title, t.FirstMessage, t.Model, t.Cwd,
		t.CreatedAt, t.UpdatedAt, t.Status, t.CurrentRolloutID, t.Rollouts, strings.Join(chain, " "), probs, firstTS,
		cur.baseErr, cur.parent, encodeNode(node))
	return err
}

// sortedLinks orders a thread's rollouts by id, as the full scan gives them
// to tree.Chain.
func sortedLinks(ls []tree.Link) []tree.Link {
	out := append([]tree.Link(nil), ls...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// touchReceipts adds the msg ids of every receipt a thread holds to touched.
func touchReceipts(ctx context.Context, tx queryer, thread string, touched map[string]bool) error {
	if touched == nil {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT msg_id FROM messages WHERE thread_id = ? AND direction = 'received' AND ordinal > 0`, thread)
	// (messages_receipts)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return err
		}
		touched[m] = true
	}
	return rows.Err()
}

// encodeNode packs what the tree needs of a thread (all but its id, its
// spawns and its problems) into threads.node, one column a big tree's
// Lineage reads per thread: each field as its length, a colon, its bytes.
func encodeNode(f tree.ThreadFacts) string {
	var b strings.Builder
	for _, s := range []string{strings.Join(f.Rollouts, " "), f.Current, f.ParentThreadID, f.ForkedFromID, f.AgentRole, f.Created,
		strconv.Itoa(f.InterruptedTurns), strconv.Itoa(f.UnknownCalls)} {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

// decodeNode unpacks threads.node.
func decodeNode(id, s string) (tree.ThreadFacts, error) {
	f := tree.ThreadFacts{ID: id}
	var fields [8]string
	for i := range fields {
		colon := strings.IndexByte(s, ':')
		n, err := strconv.Atoi(s[:max(colon, 0)])
		if colon < 0 || err != nil || n < 0 || n > len(s)-colon-1 {
			return f, fmt.Errorf("index: thread %s: a damaged node row", id)
		}
		fields[i], s = s[colon+1:colon+1+n], s[colon+1+n:]
	}
	var err1, err2 error
	f.Rollouts, f.Current, f.ParentThreadID, f.ForkedFromID, f.AgentRole, f.Created = strings.Fields(fields[0]), fields[1], fields[2], fields[3], fields[4], fields[5]
	f.InterruptedTurns, err1 = strconv.Atoi(fields[6])
	f.UnknownCalls, err2 = strconv.Atoi(fields[7])
	if err1 != nil || err2 != nil || s != "" {
		return f, fmt.Errorf("index: thread %s: a damaged node row", id)
	}
	return f, nil
}

// markSpawns keeps edges.redundant of the thread_spawned edges naming
// thread as the parent its current session_meta names changes.
func markSpawns(ctx context.Context, tx queryer, thread, old, parent string) error {
	if old == parent {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE edges SET redundant = (?2 <> '' AND parent_thread_id = ?2)
		WHERE child_thread_id = ?1 AND evidence = 'thread_spawned'`, thread, parent)
	return err
}
