package index

import (
	"context"
	"database/sql"
	"errors"
)

// rolloutState is one rollouts row: what the index knows of a rollout, and
// the projection's state between batches (the open and current turn, the
// version-0 turn rule, the title's source, the watermark).
type rolloutState struct {
	RolloutID      string
	ThreadID       string // "" until the canonical session_meta is indexed
	SchemaVersion  int
	Lines          bool // no ordinals (version 0): ordinals are line numbers
	HistoryMode    string
	ParentThreadID string
	ForkedFromID   string
	Source         string
	AgentRole      string
	MetaCwd        string
	BaseRolloutID  string
	BaseEndOrdinal int64
	BaseEndOffset  int64
	SealedBy       string
	SealedOrdinal  int64
	CreatedAt      string
	UpdatedAt      string
	Title          string
	TitleFromEvent bool
	FirstMessage   string
	Model          string
	Cwd            string
	Status         string
	Records        int64
	Turns          int64 // turns started; the last turn's seq
	OpenTurn       int64 // seq of the turn open since the last boundary; 0: none
	CurTurn        int64 // seq of the physical current turn; 0: none
	SawTaskStarted bool
	// CheckpointOrdinal and CheckpointOffset locate the newest compaction
	// in effect with a replacement_history; ordinal 0: none.
	CheckpointOrdinal, CheckpointOffset int64
	// The watermark: the last ordinal indexed, the offset just past its
	// line, the offset of its line and the CRC-32C of the line.
	WmOrdinal, WmOffset, WmLastOffset int64
	WmLastCRC                         string
	// FirstTS and LastTS are the timestamps of the first and the last
	// record indexed, as written (the tree orders and picks by them).
	FirstTS, LastTS string
	// CopyRolloutID and CopyEndOrdinal are the session_meta's fork_copy:
	// records 2 .. CopyEndOrdinal-1 are copies, counted for their origin.
	CopyRolloutID  string
	CopyEndOrdinal int64
	// BaseError says why the view's prefix (history_base) could not be
	// read; "" when it was, or there is none. BasePending: the prefix was
	// not read to its end (or not at all), so the rollout is projected
	// again when its base's mirror file grows.
	BaseError   string
	BasePending bool
	// ViewTurns counts the turns of the view's prefix (seq 1 .. ViewTurns);
	// the rollout's own turns follow.
	ViewTurns int64
	// OpenCalls counts the view's dangling calls, Interrupted the
	// interrupted turns of its current window (replay's, DESIGN §4).
	OpenCalls, Interrupted int64
}

const stateCols = `rollout_id, thread_id, schema_version, lines, history_mode, parent_thread_id, forked_from_id,
	source, agent_role, meta_cwd, base_rollout_id, base_end_ordinal, base_end_offset, sealed_by, sealed_ordinal,
	created_at, updated_at, title, title_from_event, first_message, model, cwd, status, records, turns,
	open_turn, cur_turn, saw_task_started, checkpoint_ordinal, checkpoint_offset,
	wm_ordinal, wm_offset, wm_last_offset, wm_last_crc, first_ts, last_ts, copy_rollout_id, copy_end_ordinal,
	base_error, base_pending, view_turns, open_calls, interrupted`

func (s *rolloutState) fields() []any {
	return []any{&s.RolloutID, &s.ThreadID, &s.SchemaVersion, &s.Lines, &s.HistoryMode, &s.ParentThreadID, &s.ForkedFromID,
		&s.Source, &s.AgentRole, &s.MetaCwd, &s.BaseRolloutID, &s.BaseEndOrdinal, &s.BaseEndOffset, &s.SealedBy, &s.SealedOrdinal,
		&s.CreatedAt, &s.UpdatedAt, &s.Title, &s.TitleFromEvent, &s.FirstMessage, &s.Model, &s.Cwd, &s.Status, &s.Records, &s.Turns,
		&s.OpenTurn, &s.CurTurn, &s.SawTaskStarted, &s.CheckpointOrdinal, &s.CheckpointOffset,
		&s.WmOrdinal, &s.WmOffset, &s.WmLastOffset, &s.WmLastCRC, &s.FirstTS, &s.LastTS, &s.CopyRolloutID, &s.CopyEndOrdinal,
		&s.BaseError, &s.BasePending, &s.ViewTurns, &s.OpenCalls, &s.Interrupted}
}

func (s *rolloutState) values() []any {
	return []any{s.RolloutID, s.ThreadID, s.SchemaVersion, s.Lines, s.HistoryMode, s.ParentThreadID, s.ForkedFromID,
		s.Source, s.AgentRole, s.MetaCwd, s.BaseRolloutID, s.BaseEndOrdinal, s.BaseEndOffset, s.SealedBy, s.SealedOrdinal,
		s.CreatedAt, s.UpdatedAt, s.Title, s.TitleFromEvent, s.FirstMessage, s.Model, s.Cwd, s.Status, s.Records, s.Turns,
		s.OpenTurn, s.CurTurn, s.SawTaskStarted, s.CheckpointOrdinal, s.CheckpointOffset,
		s.WmOrdinal, s.WmOffset, s.WmLastOffset, s.WmLastCRC, s.FirstTS, s.LastTS, s.CopyRolloutID, s.CopyEndOrdinal,
		s.BaseError, s.BasePending, s.ViewTurns, s.OpenCalls, s.Interrupted}
}

// queryer is what *sql.DB, *sql.Conn and *sql.Tx share.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// loadState reads a rollout's row; found is false (and s fresh) when the
// rollout is not indexed.
func loadState(ctx context.Context, q queryer, id string) (s rolloutState, found bool, err error) {
	err = q.QueryRowContext(ctx, "SELECT "+stateCols+" FROM rollouts WHERE rollout_id = ?", id).Scan(s.fields()...)
	if errors.Is(err, sql.ErrNoRows) {
		return rolloutState{RolloutID: id}, false, nil
	}
	return s, err == nil, err
}

func saveState(ctx context.Context, q queryer, s *rolloutState) error {
	_, err := q.ExecContext(ctx, "INSERT OR REPLACE INTO rollouts ("+stateCols+") VALUES ("+placeholders(43)+")", s.values()...)
	return err
}

func placeholders(n int) string {
	b := make([]byte, 0, 2*n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '?')
	}
	return string(b)
}

// resetRollout deletes every row of a rollout, refreshes its thread and
// judges again the deliveries its messages took part in: the index forgets
// it, to index it again from the mirror (or not at all when the mirror lost
// it).
func resetRollout(ctx context.Context, tx *sql.Tx, id string) error {
	var thread string
	err := tx.QueryRowContext(ctx, "SELECT thread_id FROM rollouts WHERE rollout_id = ?", id).Scan(&thread)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	touched := map[string]bool{}
	if err := collect(ctx, tx, touched, `SELECT DISTINCT msg_id FROM messages WHERE rollout_id = ?`, id); err != nil {
		return err
	}
	if err := collect(ctx, tx, touched, `SELECT DISTINCT in_reply_to FROM messages WHERE rollout_id = ? AND direction = 'sent'`, id); err != nil {
		return err
	}
	if err := expand(ctx, tx, touched); err != nil { // before its receipts go
		return err
	}
	for _, t := range rolloutTables {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t+" WHERE rollout_id = ?", id); err != nil {
			return err
		}
	}
	if thread != "" {
		if err := refreshThread(ctx, tx, thread, touched); err != nil {
			return err
		}
	}
	return judge(ctx, tx, touched, mutant{})
}
