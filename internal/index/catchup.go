package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// CatchUpReport says what a catch-up did.
type CatchUpReport struct {
	Rollouts int // mirror files read
	Records  int // records indexed
	// Reset lists rollouts whose index rows were dropped and rebuilt because
	// the mirror file no longer held what the watermark said.
	Reset []string
	// Problems are rollouts that could not be indexed to their end (damage
	// in the mirror file, a record of another rollout): the index lags there.
	Problems []error
}

// Progress reports a catch-up's advance: bytes of mirror files read so far
// (compressed files count their size on disk, once done) and records indexed.
type Progress func(bytes int64, records int)

// CatchUp indexes what the mirror holds beyond each watermark, for every
// mirror file of the data dir. Damage in one file does not stop the others:
// it is reported in CatchUpReport.Problems.
func (ix *Index) CatchUp(ctx context.Context, progress Progress) (CatchUpReport, error) {
	var rep CatchUpReport
	if ix.dir == "" {
		return rep, errors.New("index: CatchUp needs an index opened on a data dir")
	}
	files, err := datadir.MirrorFiles(ix.dir)
	if err != nil {
		return rep, err
	}
	var done int64
	ix.mu.Lock()
	defer ix.mu.Unlock()
	defer ix.abortGroup()
	if err := ix.beginGroup(ctx); err != nil {
		return rep, err
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		base := done
		n, reset, err := ix.catchUpFileLocked(ctx, f.RolloutID, f.Path, -1, func(b int64, r int) {
			if progress != nil {
				progress(base+min(b, f.Size), rep.Records+r)
			}
		})
		rep.Rollouts++
		rep.Records += n
		done += f.Size
		if reset {
			rep.Reset = append(rep.Reset, f.RolloutID)
		}
		if err != nil {
			if ctx.Err() != nil || !isRolloutProblem(err) {
				return rep, err
			}
			ix.log.Warn("index: catch-up stopped short", "rollout", f.RolloutID, "err", err)
			rep.Problems = append(rep.Problems, err)
		}
		if n > 0 || reset {
			if err := ix.dependentsLocked(ctx, f.RolloutID, &rep); err != nil {
				return rep, err
			}
		}
		if ix.grp.records >= groupRecords { // commit, and let other writers in
			if err := ix.commitGroup(ctx); err != nil {
				return rep, err
			}
			ix.mu.Unlock()
			ix.mu.Lock()
			if err := ix.beginGroup(ctx); err != nil {
				return rep, err
			}
		}
		if progress != nil {
			progress(done, rep.Records)
		}
	}
	return rep, ix.commitGroup(ctx)
}

// dependentsLocked projects again the rollouts whose view's prefix, read from
// the mirror files of their bases, was not there to its end when they were
// indexed (a base mirrored after them) and whose view holds base, which has
// grown: they are reset and indexed again from their mirror files.
func (ix *Index) dependentsLocked(ctx context.Context, base string, rep *CatchUpReport) error {
	if !ix.anyPending {
		return nil
	}
	deps, err := pendingOn(ctx, ix.q(), base)
	if err != nil {
		return err
	}
	for _, id := range deps {
		path := datadir.MirrorPath(ix.dir, id)
		if path == "" {
			continue
		}
		if err := ix.reset(ctx, id); err != nil {
			return err
		}
		n, _, err := ix.catchUpFileLocked(ctx, id, path, -1, nil)
		if rep != nil {
			rep.Records += n
		}
		if err != nil {
			if ctx.Err() != nil || !isRolloutProblem(err) {
				return err
			}
			if rep != nil {
				rep.Problems = append(rep.Problems, err)
			}
		}
	}
	return nil
}

// pendingOn lists the rollouts whose prefix was not read whole and whose
// chain of history_base rollouts passes through base.
func pendingOn(ctx context.Context, q queryer, base string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT rollout_id, base_rollout_id FROM rollouts WHERE base_pending = 1`)
	if err != nil {
		return nil, err
	}
	pending := map[string]string{}
	for rows.Next() {
		var id, b string
		if err := rows.Scan(&id, &b); err != nil {
			rows.Close()
			return nil, err
		}
		pending[id] = b
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	deps := map[string]bool{}
	for id, b := range pending {
		for depth := 0; b != "" && depth < 64; depth++ {
			if b == base {
				deps[id] = true
				break
			}
			err := q.QueryRowContext(ctx, `SELECT base_rollout_id FROM rollouts WHERE rollout_id = ?`, b).Scan(&b)
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return sortedSet(deps), nil
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// judgeAll judges every delivery again, in one transaction (after a
// catch-up that deferred it).
func (ix *Index) judgeAll(ctx context.Context) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := judgeAll(ctx, tx, ix.mutant); err != nil {
		return err
	}
	return tx.Commit()
}

// isRolloutProblem tells an error about one rollout's data from one about
// the index itself (which stops a catch-up).
func isRolloutProblem(err error) bool {
	return errors.Is(err, ErrMirrorDamaged) || errors.Is(err, ErrWrongRollout) || errors.Is(err, ErrBadBatch) ||
		errors.Is(err, ErrOutOfOrder) || errors.Is(err, rollout.ErrSeekTable) || errors.Is(err, fs.ErrNotExist)
}

// CatchUpRollout indexes what one rollout's mirror file holds beyond its
// watermark; the mirror calls it after each fsync. It returns the number of
// records indexed.
func (ix *Index) CatchUpRollout(ctx context.Context, rolloutID string) (int, error) {
	if ix.dir == "" {
		return 0, errors.New("index: CatchUpRollout needs an index opened on a data dir")
	}
	path := datadir.MirrorPath(ix.dir, rolloutID)
	if path == "" {
		return 0, fmt.Errorf("index: rollout %s: no mirror file: %w", rolloutID, fs.ErrNotExist)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n, reset, err := ix.catchUpFileLocked(ctx, rolloutID, path, -1, nil)
	if err != nil {
		return n, err
	}
	if n > 0 || reset {
		err = ix.dependentsLocked(ctx, rolloutID, nil)
	}
	return n, err
}

// CatchUpRollouts is CatchUpRollout for several rollouts, in as few
// transactions as groupRecords allows (the mirror calls it with the
// rollouts a batch touched): done is called once per id, in order, with
// the records indexed and that rollout's error. A rollout's error (its
// mirror file gone or damaged) does not stop the others; an error of the
// index itself ends the call, and is returned.
func (ix *Index) CatchUpRollouts(ctx context.Context, ids []string, done func(id string, n int, err error)) error {
	if ix.dir == "" {
		return errors.New("index: CatchUpRollouts needs an index opened on a data dir")
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	defer ix.abortGroup()
	if err := ix.beginGroup(ctx); err != nil {
		return err
	}
	type res struct {
		id  string
		n   int
		err error
	}
	var pending []res // told once their group is committed
	commit := func() error {
		if err := ix.commitGroup(ctx); err != nil {
			return err
		}
		for _, r := range pending {
			done(r.id, r.n, r.err)
		}
		pending = pending[:0]
		return nil
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		r := res{id: id}
		if path := datadir.MirrorPath(ix.dir, id); path == "" {
			r.err = fmt.Errorf("index: rollout %s: no mirror file: %w", id, fs.ErrNotExist)
		} else {
			var reset bool
			r.n, reset, r.err = ix.catchUpFileLocked(ctx, id, path, -1, nil)
			if r.err == nil && (r.n > 0 || reset) {
				r.err = ix.dependentsLocked(ctx, id, nil)
			}
		}
		if r.err != nil && (ctx.Err() != nil || !isRolloutProblem(r.err)) {
			return r.err
		}
		pending = append(pending, r)
		if ix.grp.records >= groupRecords {
			if err := commit(); err != nil {
				return err
			}
			if err := ix.beginGroup(ctx); err != nil {
				return err
			}
		}
	}
	return commit()
}

// catchUpFile indexes a mirror file from the watermark on, up to ordinal
// limit (-1: its end). The watermark is a checked hint: reading starts at the
// last indexed record's line, which must still hold that record (same
// ordinal or line, same payload checksum); if not, the rollout is reset and
// indexed from the head. reset says that happened.
func (ix *Index) catchUpFile(ctx context.Context, id, path string, limit int64, progress Progress) (n int, reset bool, err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.catchUpFileLocked(ctx, id, path, limit, progress)
}

func (ix *Index) catchUpFileLocked(ctx context.Context, id, path string, limit int64, progress Progress) (n int, reset bool, err error) {
	st, found, err := loadState(ctx, ix.q(), id)
	if err != nil {
		return 0, false, err
	}
	f, err := rollout.OpenFile(path)
	if err != nil {
		return 0, false, err
	}
	if found && st.WmOrdinal > 0 {
		cur, ok, err := resume(f, &st)
		if err != nil {
			return 0, false, err
		}
		if ok {
			n, err := ix.feed(ctx, id, cur, &st, limit, progress)
			return n, false, err
		}
		ix.log.Info("index: the mirror file no longer matches the watermark; indexing the rollout again", "rollout", id,
			"ordinal", st.WmOrdinal, "offset", st.WmLastOffset)
		if err := ix.reset(ctx, id); err != nil {
			return 0, false, err
		}
		reset = true
	}
	st = rolloutState{RolloutID: id}
	cur, err := f.Forward(0)
	if err != nil {
		return 0, reset, err
	}
	n, err = ix.feed(ctx, id, cur, &st, limit, progress)
	return n, reset, err
}

// resume opens a cursor at the last indexed record and checks that it is
// still there; ok is false when it is not.
func resume(f *rollout.File, st *rolloutState) (rollout.Cursor, bool, error) {
	cur, err := f.Forward(st.WmLastOffset)
	if err != nil {
		// Not a line start, beyond the end, or unreadable there: whatever
		// the reason, the hint is wrong and the rollout is indexed again.
		return nil, false, nil
	}
	e, err := cur.Next()
	if err != nil || e.Offset != st.WmLastOffset || e.End() != st.WmOffset || lineCRC(&e) != st.WmLastCRC ||
		(!st.Lines && e.Ordinal != st.WmOrdinal) || (st.Lines && e.Ordinal != 0) {
		cur.Close()
		return nil, false, nil
	}
	return cur, true, nil
}

func (ix *Index) reset(ctx context.Context, id string) error {
	if ix.grp != nil {
		return resetRollout(ctx, ix.grp.sqlTx, id)
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := resetRollout(ctx, tx, id); err != nil {
		return err
	}
	return tx.Commit()
}

// feed reads entries from cur (positioned after the watermark) and applies
// them in batches. Line numbers of a version-0 rollout are counted from the
// watermark's line when the cursor does not know them.
func (ix *Index) feed(ctx context.Context, id string, cur rollout.Cursor, st *rolloutState, limit int64, progress Progress) (int, error) {
	defer cur.Close()
	line := st.WmOrdinal // the line the cursor is after (version 0)
	mode := 0            // 0: unknown, 1: ordinals, 2: lines
	if st.WmOrdinal > 0 {
		mode = 1
		if st.Lines {
			mode = 2
		}
	}
	var batch []rollout.Entry
	n := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := ix.apply(ctx, id, batch); err != nil {
			return err
		}
		n += len(batch)
		if progress != nil {
			progress(batch[len(batch)-1].End(), n)
		}
		batch = batch[:0]
		return nil
	}
	for {
		e, err := cur.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var ce *rollout.CorruptionError
		if errors.As(err, &ce) {
			if ce.Torn() {
				break // a write in progress, or cut short: the index waits
			}
			if ce.Skipped() {
				line++
			}
			if mode != 1 {
				continue // version 0 (or not known yet): damaged lines are skipped, as replay does
			}
			if ferr := flush(); ferr != nil {
				return n, ferr
			}
			return n, fmt.Errorf("%w: %w", ErrMirrorDamaged, ce)
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return n, ferr
			}
			return n, err
		}
		line++
		if mode == 0 {
			mode = 1
			if e.Ordinal == 0 {
				mode = 2
			}
		}
		if e.Line == 0 && mode == 2 {
			e.Line = int(line)
		}
		if limit >= 0 && ordinalOf(&e, mode) > limit {
			break
		}
		batch = append(batch, e)
		if len(batch) >= ix.batch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

func ordinalOf(e *rollout.Entry, mode int) int64 {
	if mode == 2 {
		return int64(e.Line)
	}
	return e.Ordinal
}

// capWatermarks enforces "the index never holds what the mirror lacks" at
// start-up: a rollout whose mirror file is gone is deleted from the index;
// one whose file does not hold its last indexed record where the watermark
// says (cut short, replaced) is reset, to be indexed again by CatchUp.
func (ix *Index) capWatermarks(ctx context.Context) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rs, err := rolloutsOf(ctx, ix.db)
	if err != nil {
		return err
	}
	for _, r := range rs {
		path := datadir.MirrorPath(ix.dir, r.ID)
		ok := false
		if path != "" && r.WatermarkOrdinal > 0 {
			st, _, err := loadState(ctx, ix.db, r.ID)
			if err != nil {
				return err
			}
			f, err := rollout.OpenFile(path)
			if err == nil {
				var cur rollout.Cursor
				cur, ok, err = resume(f, &st)
				if cur != nil {
					cur.Close()
				}
			}
			if err != nil {
				ix.log.Warn("index: cannot read the mirror file; resetting the rollout", "rollout", r.ID, "err", err)
				ok = false
			}
		}
		if ok {
			continue
		}
		if path == "" {
			ix.log.Warn("index: the mirror has no file for an indexed rollout; dropping it from the index", "rollout", r.ID)
		} else {
			ix.log.Warn("index: the mirror file ends before the watermark; resetting the rollout", "rollout", r.ID,
				"watermark", r.WatermarkOrdinal)
		}
		if err := ix.reset(ctx, r.ID); err != nil {
			return err
		}
	}
	return nil
}
