package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// projector applies one batch of one rollout's records inside a transaction.
// It keeps nothing between batches but the rollouts row: every other piece
// of state (turns in effect, the open turn's user flag, ...) is read back
// from the tables, which the same transaction has written.
type projector struct {
	ctx context.Context
	tx  *stmtTx
	st  *rolloutState
	dir string // the data dir, where a history_base's prefix is read; "" for none
	// inheriting is set while the view's prefix is projected (view.go),
	// with origin the record's rollout and ordinal, where it was written.
	inheriting bool
	origin     struct {
		rollout string
		ordinal int64
	}
	// touched collects the msg ids whose deliveries must be judged again
	// (ledger.go): a send, receipt or note added, a receipt's effect changed.
	touched map[string]bool
	// started is the turn this projector last opened: a terminal event
	// naming it needs no lookup while it is the rollout's newest turn.
	started struct {
		rollout, id string
		seq         int64
	}
}

// inherited reports whether the record being projected is the view's
// prefix's: it shapes turns, effect and calls, and is no row of its own.
func (p *projector) inherited() bool { return p.inheriting }

func (p *projector) touch(msgs ...string) {
	if p.touched == nil {
		p.touched = map[string]bool{}
	}
	for _, m := range msgs {
		if m != "" {
			p.touched[m] = true
		}
	}
}

func (p *projector) exec(query string, args ...any) error {
	_, err := p.tx.ExecContext(p.ctx, query, args...)
	return err
}

// scan runs a one-row query; sql.ErrNoRows when it has none.
func (p *projector) scan(query string, args []any, dest ...any) error {
	return p.tx.QueryRowContext(p.ctx, query, args...).Scan(dest...)
}

// record projects one record; ord is its ordinal (its line number in a
// version-0 rollout).
func (p *projector) record(e *rollout.Entry, ord int64) error {
	st := p.st
	if !p.inherited() {
		if ts := normTime(e.Timestamp); ts != "" {
			if st.CreatedAt == "" || ts < st.CreatedAt {
				st.CreatedAt = ts
			}
			if ts > st.UpdatedAt {
				st.UpdatedAt = ts
			}
		}
		if st.FirstTS == "" {
			st.FirstTS = e.Timestamp
		}
		st.LastTS = e.Timestamp
		st.Records++
	}
	var err error
	switch e.Type {
	case rollout.TypeSessionMeta:
		if st.ThreadID == "" && !p.inherited() {
			err = p.meta(e, ord)
		}
	case rollout.TypeTurnContext:
		// An undecodable turn_context is skipped by replay (bad_payload).
		if tc, derr := rollout.Decode[rollout.TurnContext](&e.Record); derr == nil && !p.inherited() {
			err = p.exec(`INSERT INTO settings (rollout_id, ordinal, model, cwd) VALUES (?, ?, ?, ?)`, st.RolloutID, ord, tc.Model, tc.Cwd)
		}
	case rollout.TypeCompacted:
		if rh := rollout.Lookup(e.Payload, "replacement_history"); rh != nil && string(rh) != "null" {
			err = p.exec(`INSERT INTO checkpoints (rollout_id, ordinal, byte_offset) VALUES (?, ?, ?)`, st.RolloutID, ord, e.Offset)
		}
	case rollout.TypeResponseItem:
		err = p.item(e, ord)
	case rollout.TypeEventMsg:
		err = p.event(e, ord)
	}
	if err != nil {
		return fmt.Errorf("index: rollout %s %s: %w", st.RolloutID, where(st, ord), err)
	}
	return nil
}

func where(st *rolloutState, ord int64) string {
	if st.Lines {
		return "line " + strconv.FormatInt(ord, 10)
	}
	return "ordinal " + strconv.FormatInt(ord, 10)
}

// meta takes in the canonical session_meta: the rollout's identity.
func (p *projector) meta(e *rollout.Entry, ord int64) error {
	st := p.st
	m, err := rollout.Decode[rollout.SessionMeta](&e.Record)
	if err == nil {
		err = m.Validate()
	}
	if err != nil {
		return fmt.Errorf("%w: canonical session_meta: %v", ErrBadBatch, err)
	}
	if m.Rollout() != st.RolloutID {
		return fmt.Errorf("%w: the canonical session_meta names rollout %s", ErrWrongRollout, m.Rollout())
	}
	st.ThreadID, st.SchemaVersion, st.HistoryMode = m.ID, m.SchemaVersion, m.Mode()
	st.ParentThreadID, st.ForkedFromID, st.Source, st.AgentRole, st.MetaCwd = m.Parent(), m.ForkedFromID, m.Source.Kind, m.AgentRole, m.Cwd
	if b := m.HistoryBase; b != nil {
		st.BaseRolloutID, st.BaseEndOrdinal, st.BaseEndOffset = b.RolloutID, b.EndOrdinalExclusive, b.EndByteOffset
	}
	if c := m.ForkCopy; c != nil {
		st.CopyRolloutID, st.CopyEndOrdinal = c.RolloutID, c.EndOrdinalExclusive
	}
	if parent := m.Parent(); parent != "" {
		evidence := "parent_thread_id"
		if m.ParentThreadID == "" {
			evidence = "source.subagent.thread_spawn"
		}
		if err := p.edge(ord, "spawn", parent, m.ID, evidence, m.AgentRole); err != nil {
			return err
		}
	}
	if m.ForkedFromID != "" {
		if err := p.edge(ord, "fork", m.ForkedFromID, m.ID, "forked_from_id", m.AgentRole); err != nil {
			return err
		}
	}
	// Rows written before the canonical session_meta (there should be none)
	// learn their thread now.
	if err := p.exec(`UPDATE messages SET thread_id = ?1,
		from_thread = CASE WHEN direction = 'sent' THEN ?1 ELSE from_thread END,
		to_thread = CASE WHEN direction = 'received' THEN ?1 ELSE to_thread END
		WHERE rollout_id = ?2 AND thread_id = ''`, m.ID, st.RolloutID); err != nil {
		return err
	}
	if err := p.exec(`UPDATE edges SET parent_thread_id = ?1,
		redundant = EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = edges.child_thread_id AND t.tree_parent = ?1)
		WHERE rollout_id = ?2 AND evidence = 'thread_spawned' AND parent_thread_id = ''`, m.ID, st.RolloutID); err != nil {
		return err
	}
	if m.HistoryBase != nil {
		return p.inheritView(e, m)
	}
	return nil
}

// edge writes an edge. A thread_spawned edge whose child's current
// session_meta names the same parent is redundant: the tree learns nothing
// from it (a parent a child names itself stands), and a big tree's Lineage
// skips it. refreshThread keeps the flag as the child's parent changes.
func (p *projector) edge(ord int64, kind, parent, child, evidence, role string) error {
	return p.exec(`INSERT INTO edges (rollout_id, ordinal, kind, parent_thread_id, child_thread_id, evidence, agent_role, redundant)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?6 = 'thread_spawned' AND ?4 <> ''
			AND EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = ?5 AND t.tree_parent = ?4))`,
		p.st.RolloutID, ord, kind, parent, child, evidence, role)
}

// Excerpts are cut to this many runes.
const (
	excerptRunes      = 200
	titleRunes        = 120
	firstMessageRunes = 2000
)

func (p *projector) item(e *rollout.Entry, ord int64) error {
	st := p.st
	var it rollout.ResponseItem
	pl := e.Payload
	it.Type, _ = rollout.LookupString(pl, "type")
	it.Role, _ = rollout.LookupString(pl, "role")
	it.CallID, _ = rollout.LookupString(pl, "call_id")
	it.Name, _ = rollout.LookupString(pl, "name")
	if err := p.callItem(e, ord, it.Type); err != nil || p.inherited() {
		return err
	}
	var excerpt string
	switch {
	case it.Type == rollout.ItemMessage:
		if full, err := rollout.Decode[rollout.ResponseItem](&e.Record); err == nil {
			excerpt = full.Text()
		}
		if it.Role == "user" && st.Title == "" && !injected(excerpt) {
			st.Title, st.FirstMessage = clipRunes(oneLine(excerpt), titleRunes), clipRunes(excerpt, firstMessageRunes)
		}
	case rollout.IsCall(it.Type):
		excerpt = textOf(e.Payload, "arguments", "input")
	case rollout.IsCallOutput(it.Type):
		excerpt = textOf(e.Payload, "output")
	case it.Type == "reasoning":
		excerpt = summaryText(e.Payload)
	}
	return p.exec(`INSERT INTO items (rollout_id, ordinal, byte_offset, turn_seq, type, role, call_id, name, excerpt)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, st.RolloutID, ord, e.Offset, st.CurTurn, it.Type, it.Role, it.CallID, it.Name,
		clipRunes(oneLine(excerpt), excerptRunes))
}

func (p *projector) event(e *rollout.Entry, ord int64) error {
	st := p.st
	switch e.EventKind() {
	case rollout.EventTaskStarted:
		st.SawTaskStarted = true
		id, _ := rollout.LookupString(e.Payload, "turn_id")
		return p.startTurn(e, ord, id, false)
	case rollout.EventUserMessage:
		text, _ := rollout.LookupString(e.Payload, "message")
		if !st.TitleFromEvent && !p.inherited() {
			st.Title, st.FirstMessage, st.TitleFromEvent = clipRunes(oneLine(text), titleRunes), clipRunes(text, firstMessageRunes), true
		}
		// Version-0 logs without task_started: a user message opens a turn.
		if st.SchemaVersion == 0 && !st.SawTaskStarted {
			return p.startTurn(e, ord, "", true)
		}
		return p.markUser()
	case rollout.EventInterAgentReceived:
		// A task receipt makes a user turn, as replay reads it, whatever
		// else is wrong with the record.
		if k, _ := rollout.LookupString(e.Payload, "kind"); k == rollout.MsgTask {
			if err := p.markUser(); err != nil {
				return err
			}
		}
		m, err := rollout.Decode[rollout.InterAgentReceived](&e.Record)
		if err != nil {
			return nil
		}
		if ok, err := p.checkIDs(e, ord); !ok {
			return err
		}
		return p.message(e, ord, message{dir: "received", msgID: m.MsgID, key: m.IdempotencyKey, from: m.FromThread, to: st.ThreadID,
			kind: m.Kind, inReplyTo: m.InReplyTo})
	case rollout.EventInterAgentSent:
		m, err := rollout.Decode[rollout.InterAgentSent](&e.Record)
		if err != nil {
			return nil
		}
		if ok, err := p.checkIDs(e, ord); !ok {
			return err
		}
		return p.message(e, ord, message{dir: "sent", msgID: m.MsgID, key: m.IdempotencyKey, from: st.ThreadID, to: m.ToThread,
			kind: m.Kind, inReplyTo: m.InReplyTo})
	case rollout.EventReconciled:
		return p.reconciled(e, ord)
	case rollout.EventTaskComplete, rollout.EventTurnAborted:
		return p.terminal(e, ord)
	case rollout.EventThreadRolledBack:
		n := rollout.RollbackTurns(e.Payload)
		st.OpenTurn = 0
		return p.cut(n, ord)
	case rollout.EventThreadSpawned:
		if p.inherited() {
			return nil // the tree counts a thread's own records of its children
		}
		m, err := rollout.Decode[rollout.ThreadSpawned](&e.Record)
		if err != nil {
			return nil
		}
		if ok, err := p.checkIDs(e, ord); !ok {
			return err
		}
		return p.edge(ord, "spawn", st.ThreadID, m.ChildThreadID, "thread_spawned", m.AgentRole)
	case rollout.EventRolloutSealed:
		if p.inherited() {
			return nil // a base's seal does not seal its successor's view
		}
		s, err := rollout.Decode[rollout.RolloutSealed](&e.Record)
		if err != nil {
			return nil
		}
		if ok, err := p.checkIDs(e, ord); !ok {
			return err
		}
		st.SealedBy, st.SealedOrdinal = s.SuccessorRolloutID, ord // the last seal counts, as the tree reads it
	}
	return nil
}

// message is a messages row: an inter_agent_sent ("sent"), an
// inter_agent_received ("received") or a reconciled{msg_id} ("note").
type message struct {
	dir, msgID, key, from, to, kind, inReplyTo string
	outcome, evidence, by                      string
}

// message writes a messages row. Its origin is where the record was first
// written: itself, or for the view's prefix the base rollout's record; a
// fork copy's records 2 .. end-1 are marked copied (counted for their
// origin, never twice).
func (p *projector) message(e *rollout.Entry, ord int64, m message) error {
	st := p.st
	originRollout, originOrdinal := st.RolloutID, ord
	if p.inherited() {
		originRollout, originOrdinal = p.origin.rollout, p.origin.ordinal
	}
	copied := !p.inherited() && st.CopyRolloutID != "" && ord >= 2 && ord < st.CopyEndOrdinal
	p.touch(m.msgID)
	if m.dir == "sent" && m.kind == rollout.MsgResult {
		p.touch(m.inReplyTo) // the task it answers has a result now
	}
	return p.exec(`INSERT INTO messages (rollout_id, ordinal, thread_id, direction, msg_id, idempotency_key, from_thread,
		to_thread, kind, in_reply_to, turn_seq, at, origin_rollout, origin_ordinal, copied, outcome, evidence, by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		st.RolloutID, ord, st.ThreadID, m.dir, m.msgID, m.key, m.from, m.to, m.kind, m.inReplyTo, st.CurTurn, normTime(e.Timestamp),
		originRollout, originOrdinal, copied, m.outcome, m.evidence, m.by)
}

// checkIDs applies rollout.CheckEventIDs to a lineage or ledger event: one
// whose IDs could never be subject tokens is left out of the tree and the
// deliveries, and (in the rollout's own records) kept as an invalid_id
// problem. ok is false when the record is to be skipped.
func (p *projector) checkIDs(e *rollout.Entry, ord int64) (ok bool, err error) {
	cerr := rollout.CheckEventIDs(&e.Record)
	if cerr == nil {
		return true, nil
	}
	if p.inherited() {
		return false, nil
	}
	return false, p.exec(`INSERT OR REPLACE INTO problems (rollout_id, ordinal, kind, detail) VALUES (?, ?, 'invalid_id', ?)`,
		p.st.RolloutID, ord, e.EventKind()+": "+cerr.Error())
}

// reconciled projects a reconciled record: a call it settles is no longer
// dangling (replay's rule 5: any outcome but unknown), and one about a
// msg_id is a note on that delivery.
func (p *projector) reconciled(e *rollout.Entry, ord int64) error {
	if id, _ := rollout.LookupString(e.Payload, "call_id"); id != "" {
		if outcome, _ := rollout.LookupString(e.Payload, "outcome"); outcome != rollout.OutcomeUnknown {
			if err := p.closeCall(id); err != nil {
				return err
			}
		}
	}
	if p.inherited() {
		return nil
	}
	if ok, err := p.checkIDs(e, ord); !ok {
		return err
	}
	n, err := rollout.Decode[rollout.Reconciled](&e.Record)
	if err != nil || n.MsgID == "" {
		return nil
	}
	return p.message(e, ord, message{dir: "note", msgID: n.MsgID, outcome: n.Outcome, evidence: n.Evidence, by: n.By})
}

// callItem follows replay's dangling calls (rule 5) over the physical
// view: a call opens its call_id (replacing an open one of the same id), an
// output closes it. finish counts the open ones (OpenCalls).
func (p *projector) callItem(e *rollout.Entry, ord int64, typ string) error {
	switch {
	case rollout.IsCall(typ):
		it, err := rollout.Decode[rollout.ResponseItem](&e.Record)
		if err != nil || it.CallID == "" {
			return nil
		}
		return p.openCall(it.CallID, ord)
	case rollout.IsCallOutput(typ):
		if id, ok := rollout.LookupString(e.Payload, "call_id"); ok && id != "" {
			return p.closeCall(id)
		}
	}
	return nil
}

func (p *projector) openCall(id string, ord int64) error {
	return p.exec(`INSERT INTO calls (rollout_id, call_id, ordinal, open) VALUES (?, ?, ?, 1)
		ON CONFLICT (rollout_id, call_id) DO UPDATE SET ordinal = excluded.ordinal, open = 1`, p.st.RolloutID, id, ord)
}

func (p *projector) closeCall(id string) error {
	return p.exec(`UPDATE calls SET open = 0 WHERE rollout_id = ? AND call_id = ? AND open = 1`, p.st.RolloutID, id)
}

// startTurn opens a turn (replay's lifecycle rule 0).
func (p *projector) startTurn(e *rollout.Entry, ord int64, id string, user bool) error {
	st := p.st
	if id == "" {
		if e.Ordinal > 0 {
			id = "o" + strconv.FormatInt(e.Ordinal, 10)
		} else {
			id = "v0-" + strconv.FormatInt(ord, 10)
		}
	}
	st.Turns++
	st.CurTurn, st.OpenTurn = st.Turns, st.Turns
	p.started.rollout, p.started.id, p.started.seq = st.RolloutID, id, st.Turns
	return p.exec(`INSERT INTO turns (rollout_id, seq, turn_id, start_ordinal, start_offset, started_at, user, status)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, st.RolloutID, st.Turns, id, ord, e.Offset, normTime(e.Timestamp), user, replay.StatusInterrupted)
}

// markUser makes the open turn a user turn.
func (p *projector) markUser() error {
	if p.st.OpenTurn == 0 {
		return nil
	}
	return p.exec(`UPDATE turns SET user = 1 WHERE rollout_id = ? AND seq = ? AND user = 0`, p.st.RolloutID, p.st.OpenTurn)
}

// terminal ends the turn it names (else the current one); the first
// terminal event of a turn counts.
func (p *projector) terminal(e *rollout.Entry, ord int64) error {
	st := p.st
	ev, err := rollout.Decode[rollout.TurnEvent](&e.Record)
	if err != nil {
		return nil
	}
	target := st.CurTurn
	switch {
	case ev.TurnID == "":
	case p.started.rollout == st.RolloutID && p.started.seq == st.Turns && p.started.id == ev.TurnID:
		target = p.started.seq // the newest turn of that id is the newest turn
	default:
		var seq int64
		err := p.scan(`SELECT seq FROM turns WHERE rollout_id = ? AND turn_id = ? ORDER BY seq DESC LIMIT 1`,
			[]any{st.RolloutID, ev.TurnID}, &seq)
		switch {
		case err == nil:
			target = seq
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
	}
	if target == 0 {
		return nil
	}
	outcome, reason := replay.StatusCompleted, ""
	if ev.Type == rollout.EventTurnAborted {
		outcome, reason = replay.StatusAborted, ev.Reason
	}
	return p.exec(`UPDATE turns SET outcome = ?1, reason = ?2, end_ordinal = ?3,
		status = CASE WHEN rolled_back = 1 THEN 'rolled_back' ELSE ?1 END
		WHERE rollout_id = ?4 AND seq = ?5 AND outcome = ''`, outcome, reason, ord, st.RolloutID, target)
}

// cut applies a rollback marker of n user turns at ordinal marker (DESIGN §4
// rule 1, as replay's effect pass): from the start of the nth-newest user
// turn in effect, or of the oldest turn in effect when there are fewer,
// through the marker, every record goes out of effect.
func (p *projector) cut(n, marker int64) error {
	st := p.st
	if n <= 0 {
		return nil
	}
	var seq, start int64
	err := p.scan(`SELECT seq, start_ordinal FROM turns WHERE rollout_id = ? AND rolled_back = 0 AND user = 1
		ORDER BY seq DESC LIMIT 1 OFFSET ?`, []any{st.RolloutID, n - 1}, &seq, &start)
	if errors.Is(err, sql.ErrNoRows) {
		err = p.scan(`SELECT seq, start_ordinal FROM turns WHERE rollout_id = ? AND rolled_back = 0
			ORDER BY seq LIMIT 1`, []any{st.RolloutID}, &seq, &start)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil // no turn in effect: nothing to cut
	}
	if err != nil {
		return err
	}
	if err := p.exec(`UPDATE turns SET rolled_back = 1, rolled_back_by = ?, status = 'rolled_back'
		WHERE rollout_id = ? AND rolled_back = 0 AND seq >= ?`, marker, st.RolloutID, seq); err != nil {
		return err
	}
	// Receipts whose effect changes: their deliveries are judged again.
	rows, err := p.tx.QueryContext(p.ctx, `SELECT msg_id FROM messages WHERE rollout_id = ? AND ordinal BETWEEN ? AND ?
		AND in_effect = 1 AND direction = 'received'`, st.RolloutID, start, marker)
	if err != nil {
		return err
	}
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return err
		}
		p.touch(m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// A cut from the view's prefix (ordinals below 0) reaches the rollout's
	// own records from the first after its session_meta (ordinal 1), which
	// comes before the prefix in the view and is never cut.
	meta := int64(0)
	if start < 0 {
		meta = 1
	}
	for _, t := range []string{"items", "settings", "checkpoints", "messages", "edges"} {
		if err := p.exec(`UPDATE `+t+` SET in_effect = 0 WHERE rollout_id = ? AND ordinal BETWEEN ? AND ? AND ordinal <> ? AND in_effect = 1`,
			st.RolloutID, start, marker, meta); err != nil {
			return err
		}
	}
	return nil
}

// finish derives what depends on effect (settings, checkpoint, status) and
// saves the rollouts row.
func (p *projector) finish() error {
	st := p.st
	var model, cwd string
	err := p.tx.QueryRowContext(p.ctx, `SELECT model, cwd FROM settings WHERE rollout_id = ? AND in_effect = 1 AND ordinal > 0
		ORDER BY ordinal DESC LIMIT 1`, st.RolloutID).Scan(&model, &cwd)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	st.Model, st.Cwd = model, cwd
	if st.Cwd == "" {
		st.Cwd = st.MetaCwd
	}
	st.CheckpointOrdinal, st.CheckpointOffset = 0, 0
	err = p.tx.QueryRowContext(p.ctx, `SELECT ordinal, byte_offset FROM checkpoints WHERE rollout_id = ? AND in_effect = 1 AND ordinal > 0
		ORDER BY ordinal DESC LIMIT 1`, st.RolloutID).Scan(&st.CheckpointOrdinal, &st.CheckpointOffset)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if st.Interrupted, err = p.interrupted(); err != nil {
		return err
	}
	if err := p.scan(`SELECT count(*) FROM calls WHERE rollout_id = ? AND open = 1`, []any{st.RolloutID}, &st.OpenCalls); err != nil {
		return err
	}
	st.Status = ""
	if st.Turns > st.ViewTurns {
		if err := p.tx.QueryRowContext(p.ctx, `SELECT status FROM turns WHERE rollout_id = ? AND seq = ?`,
			st.RolloutID, st.Turns).Scan(&st.Status); err != nil {
			return err
		}
	}
	return saveState(p.ctx, p.tx, st)
}
