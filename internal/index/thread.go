package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sort"
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
		model, cwd, status, created_at, updated_at, sealed_by, first_ts, last_ts FROM rollouts WHERE thread_id = ? ORDER BY created_at, rollout_id`, thread)
	if err != nil {
		return err
	}
	type ro struct {
		id, parent, forked, source, role, title, first, model, cwd, status, created, updated, sealed, firstTS, lastTS string
	}
	var rs []ro
	byID := map[string]int{}
	for rows.Next() {
		var r ro
		if err := rows.Scan(&r.id, &r.parent, &r.forked, &r.source, &r.role, &r.title, &r.first, &r.model, &r.cwd, &r.status,
			&r.created, &r.updated, &r.sealed, &r.firstTS, &r.lastTS); err != nil {
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
	var oldCur string
	err = tx.QueryRowContext(ctx, `SELECT current_rollout_id FROM threads WHERE thread_id = ?`, thread).Scan(&oldCur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if len(rs) == 0 {
		if oldCur != "" {
			if err := touchReceipts(ctx, tx, thread, touched); err != nil {
				return err
			}
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
	// A new thread's receipts are all in this batch, touched already.
	if oldCur != t.CurrentRolloutID && oldCur != "" {
		if err := touchReceipts(ctx, tx, thread, touched); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO threads (thread_id, parent_thread_id, forked_from_id, source, agent_role, title,
		first_message, model, cwd, created_at, updated_at, status, current_rollout_id, rollouts, chain, chain_problems, first_ts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (thread_id) DO UPDATE SET parent_thread_id = excluded.parent_thread_id, forked_from_id = excluded.forked_from_id,
		source = excluded.source, agent_role = excluded.agent_role, title = excluded.title, first_message = excluded.first_message,
		model = excluded.model, cwd = excluded.cwd, created_at = excluded.created_at, updated_at = excluded.updated_at,
		status = excluded.status, current_rollout_id = excluded.current_rollout_id, rollouts = excluded.rollouts,
		chain = excluded.chain, chain_problems = excluded.chain_problems, first_ts = excluded.first_ts`,
		t.ID, t.ParentThreadID, t.ForkedFromID, t.Source, t.AgentRole, t.Title, t.FirstMessage, t.Model, t.Cwd,
		t.CreatedAt, t.UpdatedAt, t.Status, t.CurrentRolloutID, t.Rollouts, strings.Join(chain, " "), probs, firstTS)
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
