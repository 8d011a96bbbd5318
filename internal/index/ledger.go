package index

import (
	"context"
	"database/sql"
	"errors"
	"sort"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// The delivery ledger as a projection (DESIGN §7). Every messages row with
// an ordinal above 0 that is not a fork copy is one send, receipt or note of
// the ledger, counted once, for where it was written. A receipt is in effect
// when its thread's current rollout holds it in effect: that rollout's own
// row, or the row of its view's prefix whose origin it is (a revert), never
// a rollout the chain left behind, and nothing when the current view could
// not be read. The deliveries table holds dedupe's judgement of every
// (msg_id, receiving thread) with the child result it makes, if any; an
// apply judges again, in its transaction, the msg ids whose rows it added
// or whose receipts' effect it changed, and those that share an idempotency
// key with them at the same receiver. The rule is dedupe's, not restated:
// the rows of the msg ids involved are loaded into a dedupe.Ledger and
// classified there.

// physical selects the ledger's rows: not the view's prefix, not copies.
const physical = `ordinal > 0 AND copied = 0 AND thread_id <> ''`

const ledgerCols = `rollout_id, ordinal, thread_id, direction, msg_id, idempotency_key, from_thread, to_thread, kind, in_reply_to,
	outcome, evidence, by`

type ledgerRow struct {
	rollout                                          string
	ordinal                                          int64
	thread, dir, msg, key, from, to, kind, inReplyTo string
	outcome, evidence, by                            string
}

// expand adds to msgs the msg ids that share an idempotency key with one of
// their receipts at its receiver (dedupe's possibly_duplicated by key).
func expand(ctx context.Context, q queryer, msgs map[string]bool) error {
	type rk struct{ to, key string }
	var keys []rk
	for m := range msgs {
		rows, err := q.QueryContext(ctx, `SELECT DISTINCT to_thread, idempotency_key FROM messages
			WHERE msg_id = ? AND direction = 'received' AND idempotency_key <> '' AND `+physical, m)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k rk
			if err := rows.Scan(&k.to, &k.key); err != nil {
				rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := collect(ctx, q, msgs, `SELECT DISTINCT msg_id FROM messages WHERE to_thread = ? AND idempotency_key = ?
			AND direction IN ('sent', 'received') AND `+physical, k.to, k.key); err != nil {
			return err
		}
	}
	return nil
}

// collect adds the strings a one-column query returns to set.
func collect(ctx context.Context, q queryer, set map[string]bool, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		if s != "" {
			set[s] = true
		}
	}
	return rows.Err()
}

// judge classifies again every delivery of the msg ids in touched (and of
// those sharing an idempotency key with them) and rewrites their rows.
func judge(ctx context.Context, q queryer, touched map[string]bool, mut mutant) error {
	if len(touched) == 0 {
		return nil
	}
	msgs := make(map[string]bool, len(touched))
	for m := range touched {
		msgs[m] = true
	}
	if err := expand(ctx, q, msgs); err != nil {
		return err
	}
	lj := &ledgerJudge{ctx: ctx, q: q, l: dedupe.New(), cur: map[string]string{}, mut: mut}
	type rk struct{ to, key string }
	keys := map[rk]bool{}
	for m := range msgs {
		rs, err := lj.rows(`SELECT `+ledgerCols+` FROM messages WHERE msg_id = ? AND `+physical, m)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.key != "" && r.dir != "note" {
				keys[rk{r.to, r.key}] = true
			}
		}
		// The results that answer it: a task with one has a result.
		if _, err := lj.rows(`SELECT `+ledgerCols+` FROM messages WHERE in_reply_to = ? AND direction = 'sent' AND kind = ? AND `+physical,
			m, rollout.MsgResult); err != nil {
			return err
		}
	}
	// Every receipt at each receiver under each key in play, for dedupe's
	// "one idempotency key received under two msg_ids".
	for k := range keys {
		if _, err := lj.rows(`SELECT `+ledgerCols+` FROM messages WHERE to_thread = ? AND idempotency_key = ? AND direction = 'received' AND `+physical,
			k.to, k.key); err != nil {
			return err
		}
	}
	ms := make([]string, 0, len(msgs))
	for m := range msgs {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	for _, m := range ms {
		if _, err := q.ExecContext(ctx, `DELETE FROM deliveries WHERE msg_id = ?`, m); err != nil {
			return err
		}
	}
	for _, d := range lj.l.Classify() {
		if !msgs[d.MsgID] {
			continue // incomplete here: only its rows that touch these msg ids were loaded
		}
		var cr dedupe.ChildResult
		if crs := lj.l.ChildResults([]dedupe.Delivery{d}); len(crs) > 0 {
			cr = crs[0]
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO deliveries (msg_id, to_thread, idempotency_key, from_thread, kind, in_reply_to,
			state, reason, sends, receipts, receipts_in_effect, cr_task, cr_result, cr_parent, cr_child, cr_state, cr_reason)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.MsgID, d.ToThread, d.IdempotencyKey, d.FromThread, d.Kind, d.InReplyTo, d.State, d.Reason, d.Sends, d.Receipts, d.InEffect,
			cr.TaskMsgID, cr.ResultMsgID, cr.Parent, cr.Child, cr.State, cr.Reason); err != nil {
			return err
		}
	}
	return nil
}

// ledgerJudge loads messages rows into a dedupe.Ledger.
type ledgerJudge struct {
	ctx context.Context
	q   queryer
	l   *dedupe.Ledger
	cur map[string]string // thread -> its current rollout ("" when its view is unknown)
	mut mutant
}

func (lj *ledgerJudge) rows(query string, args ...any) ([]ledgerRow, error) {
	rows, err := lj.q.QueryContext(lj.ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []ledgerRow
	for rows.Next() {
		var r ledgerRow
		if err := rows.Scan(&r.rollout, &r.ordinal, &r.thread, &r.dir, &r.msg, &r.key, &r.from, &r.to, &r.kind, &r.inReplyTo,
			&r.outcome, &r.evidence, &r.by); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, r := range out {
		if err := lj.add(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (lj *ledgerJudge) add(r ledgerRow) error {
	origin := dedupe.Origin{Rollout: r.rollout, Ordinal: r.ordinal}
	switch r.dir {
	case "sent":
		lj.l.AddSend(dedupe.Send{MsgID: r.msg, IdempotencyKey: r.key, From: r.from, To: r.to, Kind: r.kind, InReplyTo: r.inReplyTo, Origin: origin})
	case "received":
		in, err := lj.inEffect(r)
		if err != nil {
			return err
		}
		lj.l.AddReceipt(dedupe.Receipt{MsgID: r.msg, IdempotencyKey: r.key, From: r.from, To: r.to, Kind: r.kind, InReplyTo: r.inReplyTo,
			Origin: origin, InEffect: in})
	case "note":
		lj.l.AddNote(dedupe.Note{MsgID: r.msg, Outcome: r.outcome, Evidence: r.evidence, By: r.by, Origin: origin})
	}
	return nil
}

// inEffect says whether a receipt is in effect in its thread's current view.
func (lj *ledgerJudge) inEffect(r ledgerRow) (bool, error) {
	cur, ok := lj.cur[r.thread]
	if !ok {
		err := lj.q.QueryRowContext(lj.ctx, `SELECT t.current_rollout_id FROM threads t JOIN rollouts r ON r.rollout_id = t.current_rollout_id
			WHERE t.thread_id = ? AND r.base_error = ''`, r.thread).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
		lj.cur[r.thread] = cur
	}
	if cur == "" || (lj.mut.receiptsIgnoreView && cur != r.rollout) {
		return false, nil
	}
	var in bool
	err := lj.q.QueryRowContext(lj.ctx, `SELECT in_effect FROM messages WHERE origin_rollout = ? AND origin_ordinal = ? AND rollout_id = ?`,
		r.rollout, r.ordinal, cur).Scan(&in)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return in, err
}
