package index

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// A rollout with a history_base (a fork by reference, a revert) is read as
// its view: its session_meta, the frozen prefix of the base's view, then its
// own records (DESIGN §6). Its turns, effect and calls are the view's, so
// the prefix is projected into the rollout's own rows too, right after its
// session_meta, by the same rules as any record: turns (seq 1 ..
// ViewTurns), receipts and sends, checkpoints and calls, at ordinals below
// 0 (the record's virtual offset minus the prefix's end, so they sort in
// view order), each message with its origin (the base rollout and ordinal
// where it was written). A rollback in the rollout's own records then cuts
// into the prefix exactly as replay's effect pass does over the joined view,
// and a terminal event names a prefix turn by id. The prefix's items,
// settings, edges and notes are not repeated: the rows of the rollout that
// holds them stand.
//
// The prefix is read from the mirror files of the data dir when the
// session_meta is projected; a base that cannot be read (no file, a bad
// history_base) leaves BaseError set, and the thread's view unknown, as the
// full scan reports it (bad_base). CatchUp projects such a rollout again once
// its base's mirror file is there.

// inheritView projects the prefix of the view of the rollout whose canonical
// session_meta is meta.
func (p *projector) inheritView(meta *rollout.Entry, m rollout.SessionMeta) error {
	st := p.st
	st.BasePending = true // until the prefix is read to its end
	if p.dir == "" {
		st.BaseError = fmt.Sprintf("rollout %s history_base: no data dir to read rollout %s from", st.RolloutID, m.HistoryBase.RolloutID)
		return nil
	}
	view, segs, err := prefixView(p.dir, st.RolloutID, m.HistoryBase, meta.End())
	if err != nil {
		st.BaseError = err.Error()
		return nil
	}
	cur, err := view.Forward(0)
	if err != nil {
		st.BaseError = err.Error()
		return nil
	}
	defer cur.Close()
	end := segs[len(segs)-1].start // the rollout's own records begin here
	// reached[i]: segment i was read to its end (a base file mirrored
	// only in part is read again once it grows).
	reached := make([]bool, len(segs)-1)
	for i := range reached {
		reached[i] = i == 0 || segs[i].start == segs[i+1].start
	}
	si := 0
	p.inheriting = true
	defer func() { p.inheriting = false }()
	err = rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		if e.Offset >= end {
			return false, nil
		}
		for si+1 < len(segs) && e.Offset >= segs[si+1].start {
			si++
		}
		if si == 0 {
			return true, nil // the rollout's own session_meta
		}
		ord := e.Ordinal
		if ord == 0 {
			ord = int64(e.Line)
		}
		p.origin.rollout, p.origin.ordinal = segs[si].rollout, ord
		if e.End() == segs[si+1].start {
			reached[si] = true
		}
		return true, p.record(&e, e.Offset-end)
	})
	if err != nil {
		return err
	}
	st.ViewTurns = st.Turns
	st.BasePending = slices.Contains(reached, false)
	return nil
}

type viewSegment struct {
	rollout string
	start   int64 // virtual offset in the view
}

// prefixView opens the view of rollout id (with history_base base, its
// session_meta ending at metaEnd) from the mirror files of dir, and says
// which rollout each virtual range comes from. A base that is not there is
// named as the full scan names it.
func prefixView(dir, id string, base *rollout.HistoryPosition, metaEnd int64) (*rollout.Joined, []viewSegment, error) {
	path := datadir.MirrorPath(dir, id)
	if path == "" {
		return nil, nil, fmt.Errorf("rollout %s is not here", id)
	}
	own, err := rollout.OpenFile(path)
	if err != nil {
		return nil, nil, err
	}
	segs, leaves, err := rollout.ViewSegments(id, func(rid string) (rollout.Head, error) {
		if rid == id {
			return rollout.Head{Log: own, HistoryBase: base, MetaEnd: metaEnd}, nil
		}
		p := datadir.MirrorPath(dir, rid)
		if p == "" {
			return rollout.Head{}, fmt.Errorf("rollout %s is not here", rid)
		}
		f, err := rollout.OpenFile(p)
		if err != nil {
			return rollout.Head{}, err
		}
		return rollout.ReadHead(f)
	})
	if err != nil {
		return nil, nil, err
	}
	j, err := rollout.NewJoined(own.Name(), segs...)
	if err != nil {
		return nil, nil, err
	}
	out := make([]viewSegment, len(leaves))
	for i, v := range j.Segments() {
		out[i] = viewSegment{rollout: leaves[i], start: v[0]}
	}
	return j, out, nil
}

// interrupted counts the interrupted turns of the view's current window, as
// replay's State.Turns holds them: from the newest turn in effect that
// starts before the newest checkpoint in effect (else from the first turn
// after that checkpoint), every turn when there is no checkpoint.
func (p *projector) interrupted() (int64, error) {
	st := p.st
	from := int64(math.MinInt64)
	var cp int64
	err := p.scan(`SELECT ordinal FROM checkpoints WHERE rollout_id = ? AND in_effect = 1 ORDER BY ordinal DESC LIMIT 1`,
		[]any{st.RolloutID}, &cp)
	switch {
	case err == nil:
		var k sql.NullInt64
		// seq and start_ordinal grow together: the newest such turn is
		// the first met walking back from the last.
		err := p.scan(`SELECT start_ordinal FROM turns WHERE rollout_id = ? AND rolled_back = 0 AND start_ordinal < ? ORDER BY seq DESC LIMIT 1`,
			[]any{st.RolloutID, cp}, &k)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
		from = cp + 1
		if k.Valid {
			from = k.Int64
		}
	case !errors.Is(err, sql.ErrNoRows):
		return 0, err
	}
	var n int64
	err = p.scan(`SELECT count(*) FROM turns WHERE rollout_id = ? AND status = 'interrupted' AND start_ordinal >= ?`,
		[]any{st.RolloutID, from}, &n)
	return n, err
}
