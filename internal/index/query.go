package index

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
)

// queries are the reads an Index and a Reader share.
type queries struct{ db *sql.DB }

// Thread is one row of the threads table.
type Thread struct {
	ID               string `json:"thread_id"`
	ParentThreadID   string `json:"parent_thread_id"`
	ForkedFromID     string `json:"forked_from_id"`
	Source           string `json:"source"`
	AgentRole        string `json:"agent_role"`
	Title            string `json:"title"`
	FirstMessage     string `json:"first_message"`
	Model            string `json:"model"`
	Cwd              string `json:"cwd"`
	CreatedAt        string `json:"created_at"`
	UpdatedAt        string `json:"updated_at"`
	Status           string `json:"status"`
	CurrentRolloutID string `json:"current_rollout_id"`
	Rollouts         int    `json:"rollouts"`
}

const threadCols = `thread_id, parent_thread_id, forked_from_id, source, agent_role, title, first_message, model, cwd,
	created_at, updated_at, status, current_rollout_id, rollouts`

func (t *Thread) fields() []any {
	return []any{&t.ID, &t.ParentThreadID, &t.ForkedFromID, &t.Source, &t.AgentRole, &t.Title, &t.FirstMessage, &t.Model,
		&t.Cwd, &t.CreatedAt, &t.UpdatedAt, &t.Status, &t.CurrentRolloutID, &t.Rollouts}
}

// Page sizes of Threads.
const (
	DefaultLimit = 20
	MaxLimit     = 1000
)

// ThreadQuery asks for one page of threads, newest first (by created_at,
// then thread id).
type ThreadQuery struct {
	// Search keeps threads whose id, title, first message, cwd or model
	// holds every word of it, case-insensitively.
	Search string
	Limit  int    // 0: DefaultLimit; at most MaxLimit
	Cursor string // "" for the first page, else a ThreadPage.NextCursor
	Method SearchMethod
	budget int // SearchAuto's LIKE budget; 0: likeBudget (tests lower it)
}

// ThreadPage is one page of threads.
type ThreadPage struct {
	Threads []Thread `json:"threads"`
	// NextCursor fetches the next page; "" on the last one. Paging is by
	// key (created_at, thread_id), which never changes for a thread, so
	// threads indexed while a client pages never make it skip or repeat one.
	NextCursor string `json:"next_cursor"`
}

type cursor struct {
	V       int    `json:"v"`
	Created string `json:"c"`
	Thread  string `json:"t"`
	Search  uint32 `json:"q"`
}

func searchHash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(strings.Join(strings.Fields(s), " "))))
	return h.Sum32()
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s, search string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.V != 1 || c.Thread == "" {
		return c, fmt.Errorf("%w: %q is not a threads cursor", ErrBadCursor, s)
	}
	if c.Search != searchHash(search) {
		return c, fmt.Errorf("%w: the cursor belongs to another search; page with the same --search", ErrBadCursor)
	}
	return c, nil
}

// Thread returns the thread with id, or the only one whose id starts with it.
func (q *queries) Thread(ctx context.Context, id string) (Thread, error) {
	var t Thread
	err := q.db.QueryRowContext(ctx, "SELECT "+threadCols+" FROM threads WHERE thread_id = ?", id).Scan(t.fields()...)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return t, err
	}
	if id == "" {
		return t, fmt.Errorf("%w: empty id", ErrUnknownThread)
	}
	// Thread ids are [A-Za-z0-9_-], all below 0x7f: a range scan finds a prefix.
	rows, err := q.db.QueryContext(ctx, "SELECT "+threadCols+" FROM threads WHERE thread_id > ? AND thread_id < ? ORDER BY thread_id LIMIT 2", id, id+"\x7f")
	if err != nil {
		return t, err
	}
	defer rows.Close()
	var found []Thread
	for rows.Next() {
		var t Thread
		if err := rows.Scan(t.fields()...); err != nil {
			return t, err
		}
		found = append(found, t)
	}
	if err := rows.Err(); err != nil {
		return t, err
	}
	switch len(found) {
	case 0:
		return t, fmt.Errorf("%w %s", ErrUnknownThread, id)
	case 1:
		return found[0], nil
	}
	return t, fmt.Errorf("%w: %s matches %s, %s and maybe more", ErrAmbiguousThread, id, found[0].ID, found[1].ID)
}

// Rollout is what the index holds about one rollout.
type Rollout struct {
	ID            string `json:"rollout_id"`
	ThreadID      string `json:"thread_id"`
	SchemaVersion int    `json:"schema_version"`
	// Lines: no ordinals (version 0); the index's ordinals are line numbers.
	Lines       bool   `json:"lines"`
	HistoryMode string `json:"history_mode"`
	SealedBy    string `json:"sealed_by"`
	Records     int64  `json:"records"`
	// The watermark: last ordinal (line) indexed, offset just past it.
	WatermarkOrdinal int64 `json:"watermark_ordinal"`
	WatermarkOffset  int64 `json:"watermark_offset"`
	// The newest in-effect checkpoint; ordinal 0: none.
	CheckpointOrdinal int64 `json:"checkpoint_ordinal"`
	CheckpointOffset  int64 `json:"checkpoint_offset"`
}

const rolloutCols = `rollout_id, thread_id, schema_version, lines, history_mode, sealed_by, records, wm_ordinal, wm_offset,
	checkpoint_ordinal, checkpoint_offset`

func (r *Rollout) fields() []any {
	return []any{&r.ID, &r.ThreadID, &r.SchemaVersion, &r.Lines, &r.HistoryMode, &r.SealedBy, &r.Records, &r.WatermarkOrdinal,
		&r.WatermarkOffset, &r.CheckpointOrdinal, &r.CheckpointOffset}
}

// Rollout returns one indexed rollout; found is false when it is not indexed.
func (q *queries) Rollout(ctx context.Context, id string) (r Rollout, found bool, err error) {
	err = q.db.QueryRowContext(ctx, "SELECT "+rolloutCols+" FROM rollouts WHERE rollout_id = ?", id).Scan(r.fields()...)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

// Rollouts returns every indexed rollout, by id.
func (q *queries) Rollouts(ctx context.Context) ([]Rollout, error) {
	return rolloutsOf(ctx, q.db)
}

func rolloutsOf(ctx context.Context, db queryer) ([]Rollout, error) {
	rows, err := db.QueryContext(ctx, "SELECT "+rolloutCols+" FROM rollouts ORDER BY rollout_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Rollout
	for rows.Next() {
		var r Rollout
		if err := rows.Scan(r.fields()...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Turn is one turn of a rollout as the index holds it.
type Turn struct {
	Seq          int64  `json:"seq"`
	TurnID       string `json:"turn_id"`
	StartOrdinal int64  `json:"start_ordinal"`
	Status       string `json:"status"`
	Reason       string `json:"reason,omitempty"`
	User         bool   `json:"user"`
	RolledBack   bool   `json:"rolled_back"`
}

// Turns returns every turn of a rollout, in order.
func (q *queries) Turns(ctx context.Context, rolloutID string) ([]Turn, error) {
	rows, err := q.db.QueryContext(ctx, `SELECT seq, turn_id, start_ordinal, status, reason, user, rolled_back FROM turns
		WHERE rollout_id = ? ORDER BY seq`, rolloutID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		var t Turn
		if err := rows.Scan(&t.Seq, &t.TurnID, &t.StartOrdinal, &t.Status, &t.Reason, &t.User, &t.RolledBack); err != nil {
			return nil, err
		}
		if t.Status != "aborted" {
			t.Reason = "" // replay shows a reason for aborted turns only
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
