package index

import (
	"context"
)

// refreshThread recomputes a thread's row from its rollouts' rows (or deletes
// it when none is left):
//
//   - identity (parent, fork origin, source, agent role) from its oldest
//     rollout, where the thread began;
//   - title and first message from the oldest rollout that has one;
//   - created_at the earliest record timestamp, updated_at the latest;
//   - the current rollout: the newest not sealed by a rollout_sealed event
//     (the newest of all when every one is sealed); model, cwd and status
//     (its last turn's) from it, model from the newest rollout that has one
//     when it has none.
func refreshThread(ctx context.Context, tx queryer, thread string) error {
	rows, err := tx.QueryContext(ctx, `SELECT rollout_id, parent_thread_id, forked_from_id, source, agent_role, title, first_message,
		model, cwd, status, created_at, updated_at, sealed_by FROM rollouts WHERE thread_id = ? ORDER BY created_at, rollout_id`, thread)
	if err != nil {
		return err
	}
	type ro struct {
		id, parent, forked, source, role, title, first, model, cwd, status, created, updated, sealed string
	}
	var rs []ro
	for rows.Next() {
		var r ro
		if err := rows.Scan(&r.id, &r.parent, &r.forked, &r.source, &r.role, &r.title, &r.first, &r.model, &r.cwd, &r.status,
			&r.created, &r.updated, &r.sealed); err != nil {
			rows.Close()
			return err
		}
		rs = append(rs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(rs) == 0 {
		_, err := tx.ExecContext(ctx, `DELETE FROM threads WHERE thread_id = ?`, thread)
		return err
	}
	first, cur := rs[0], rs[len(rs)-1]
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].sealed == "" {
			cur = rs[i]
			break
		}
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
	_, err = tx.ExecContext(ctx, `INSERT INTO threads (thread_id, parent_thread_id, forked_from_id, source, agent_role, title,
		first_message, model, cwd, created_at, updated_at, status, current_rollout_id, rollouts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (thread_id) DO UPDATE SET parent_thread_id = excluded.parent_thread_id, forked_from_id = excluded.forked_from_id,
		source = excluded.source, agent_role = excluded.agent_role, title = excluded.title, first_message = excluded.first_message,
		model = excluded.model, cwd = excluded.cwd, created_at = excluded.created_at, updated_at = excluded.updated_at,
		status = excluded.status, current_rollout_id = excluded.current_rollout_id, rollouts = excluded.rollouts`,
		t.ID, t.ParentThreadID, t.ForkedFromID, t.Source, t.AgentRole, t.Title, t.FirstMessage, t.Model, t.Cwd,
		t.CreatedAt, t.UpdatedAt, t.Status, t.CurrentRolloutID, t.Rollouts)
	return err
}
