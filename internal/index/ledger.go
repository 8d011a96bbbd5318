package index

import (
	"context"

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
const (
	physical  = `ordinal > 0 AND copied = 0 AND thread_id <> ''`
	physicalM = `m.ordinal > 0 AND m.copied = 0 AND m.thread_id <> ''`
)

// ledgerCols are a messages row (alias m) for the ledger, with, for a
// receipt, whether its thread's current view holds it in effect and that
// current rollout ("" when the view is unknown).
const ledgerCols = `m.rollout_id, m.ordinal, m.thread_id, m.direction, m.msg_id, m.idempotency_key, m.from_thread, m.to_thread, m.kind,
	m.in_reply_to, m.outcome, m.evidence, m.by,
	CASE WHEN m.direction <> 'received' THEN 0
		WHEN (SELECT t.current_rollout_id FROM threads t WHERE t.thread_id = m.thread_id) = m.rollout_id
		THEN m.in_effect AND (SELECT r.base_error = '' FROM rollouts r WHERE r.rollout_id = m.rollout_id)
		ELSE coalesce((SELECT v.in_effect FROM threads t JOIN rollouts r ON r.rollout_id = t.current_rollout_id
			JOIN messages v INDEXED BY messages_origin ON v.origin_rollout = m.rollout_id AND v.origin_ordinal = m.ordinal
				AND v.rollout_id = t.current_rollout_id AND v.ordinal < 0
			WHERE t.thread_id = m.thread_id AND r.base_error = ''), 0) END,
	CASE WHEN m.direction = 'received' THEN coalesce((SELECT t.current_rollout_id FROM threads t WHERE t.thread_id = m.thread_id), '') ELSE '' END`

type ledgerRow struct {
	rollout                                          string
	ordinal                                          int64
	thread, dir, msg, key, from, to, kind, inReplyTo string
	outcome, evidence, by                            string
	inEffect                                         bool
	current                                          string
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
// those sharing an idempotency key with them at a receiver) and rewrites
// their rows.
func judge(ctx context.Context, q queryer, touched map[string]bool, mut mutant) error {
	if len(touched) == 0 {
		return nil
	}
	lj := &ledgerJudge{ctx: ctx, q: q, l: dedupe.New(), mut: mut}
	msgs := make(map[string]bool, len(touched))
	for m := range touched {
		msgs[m] = true
	}
	type rk struct{ to, key string }
	keys := map[rk]bool{}
	// load adds a msg id's rows, the results that answer it (a task with one
	// has a result) and every row under each (receiver, idempotency key) it
	// uses (dedupe's "one key received under two msg_ids"); neighbours, when
	// asked, collects the msg ids met there, whose deliveries it changes.
	load := func(m string, neighbours map[string]bool) error {
		rs, err := lj.rows(`SELECT `+ledgerCols+` FROM messages m WHERE m.msg_id = ? AND `+physicalM, m)
		if err != nil {
			return err
		}
		if _, err := lj.rows(`SELECT `+ledgerCols+` FROM messages m WHERE m.in_reply_to = ? AND m.in_reply_to <> '' AND m.direction = 'sent'
			AND m.kind = ? AND `+physicalM, m, rollout.MsgResult); err != nil {
			return err
		}
		for _, r := range rs {
			k := rk{r.to, r.key}
			if r.key == "" || r.dir == "note" || keys[k] {
				continue
			}
			keys[k] = true
			ks, err := lj.rows(`SELECT `+ledgerCols+` FROM messages m WHERE m.to_thread = ? AND m.idempotency_key = ?
				AND m.direction IN ('sent', 'received') AND `+physicalM, k.to, k.key)
			if err != nil {
				return err
			}
			for _, x := range ks {
				if neighbours != nil && !msgs[x.msg] {
					neighbours[x.msg] = true
				}
			}
		}
		return nil
	}
	neighbours := map[string]bool{}
	for _, m := range sortedSet(msgs) {
		if err := load(m, neighbours); err != nil {
			return err
		}
	}
	for _, m := range sortedSet(neighbours) {
		msgs[m] = true
		if err := load(m, nil); err != nil {
			return err
		}
	}
	for _, m := range sortedSet(msgs) {
		if _, err := q.ExecContext(ctx, `DELETE FROM deliveries WHERE msg_id = ?`, m); err != nil {
			return err
		}
	}
	// Only these msg ids' deliveries: the others are incomplete here.
	return writeDeliveries(ctx, q, lj.l, func(m string) bool { return msgs[m] })
}

// judgeAll judges every delivery again from every ledger row at once: a
// rebuild (whose file nobody reads until it is complete) indexes every
// rollout first and judges once at the end.
func judgeAll(ctx context.Context, q queryer, mut mutant) error {
	lj := &ledgerJudge{ctx: ctx, q: q, l: dedupe.New(), mut: mut}
	if _, err := lj.rows(`SELECT ` + ledgerCols + ` FROM messages m WHERE ` + physicalM); err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM deliveries`); err != nil {
		return err
	}
	return writeDeliveries(ctx, q, lj.l, func(string) bool { return true })
}

// writeDeliveries classifies a ledger and writes the deliveries of the msg
// ids keep accepts, each with the child result it makes.
func writeDeliveries(ctx context.Context, q queryer, l *dedupe.Ledger, keep func(msg string) bool) error {
	var ds []dedupe.Delivery
	for _, d := range l.Classify() {
		if keep(d.MsgID) {
			ds = append(ds, d)
		}
	}
	// A child result is made by one delivery: a task's to its child, a
	// result's to its parent.
	type key struct{ msg, to string }
	crs := map[key]dedupe.ChildResult{}
	for _, c := range l.ChildResults(ds) {
		if c.ResultMsgID == "" {
			crs[key{c.TaskMsgID, c.Child}] = c
		} else {
			crs[key{c.ResultMsgID, c.Parent}] = c
		}
	}
	for _, d := range ds {
		cr := crs[key{d.MsgID, d.ToThread}]
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
	ctx  context.Context
	q    queryer
	l    *dedupe.Ledger
	mut  mutant
	seen map[dedupe.Origin]bool
}

// rows runs a query of ledgerCols and adds each row to the ledger once.
func (lj *ledgerJudge) rows(query string, args ...any) ([]ledgerRow, error) {
	rows, err := lj.q.QueryContext(lj.ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if lj.seen == nil {
		lj.seen = map[dedupe.Origin]bool{}
	}
	var out []ledgerRow
	for rows.Next() {
		var r ledgerRow
		if err := rows.Scan(&r.rollout, &r.ordinal, &r.thread, &r.dir, &r.msg, &r.key, &r.from, &r.to, &r.kind, &r.inReplyTo,
			&r.outcome, &r.evidence, &r.by, &r.inEffect, &r.current); err != nil {
			return nil, err
		}
		out = append(out, r)
		if o := (dedupe.Origin{Rollout: r.rollout, Ordinal: r.ordinal}); !lj.seen[o] {
			lj.seen[o] = true
			lj.add(r)
		}
	}
	return out, rows.Err()
}

func (lj *ledgerJudge) add(r ledgerRow) {
	origin := dedupe.Origin{Rollout: r.rollout, Ordinal: r.ordinal}
	switch r.dir {
	case "sent":
		lj.l.AddSend(dedupe.Send{MsgID: r.msg, IdempotencyKey: r.key, From: r.from, To: r.to, Kind: r.kind, InReplyTo: r.inReplyTo, Origin: origin})
	case "received":
		in := r.inEffect && !(lj.mut.receiptsIgnoreView && r.current != r.rollout)
		lj.l.AddReceipt(dedupe.Receipt{MsgID: r.msg, IdempotencyKey: r.key, From: r.from, To: r.to, Kind: r.kind, InReplyTo: r.inReplyTo,
			Origin: origin, InEffect: in})
	case "note":
		lj.l.AddNote(dedupe.Note{MsgID: r.msg, Outcome: r.outcome, Evidence: r.evidence, By: r.by, Origin: origin})
	}
}
