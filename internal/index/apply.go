package index

import (
	"context"
	"fmt"

	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Apply indexes a batch of one rollout's records in one transaction. The
// batch must follow the rollout's watermark: its first record is the next
// ordinal (at the byte offset just past the last indexed record) in a
// rollout with ordinals, or a later line in a version-0 rollout, whose
// entries must carry their line numbers; else Apply returns an *OrderError
// (ErrOutOfOrder) and writes nothing. Within the batch, ordinals are
// consecutive and lines adjacent (version 0: increasing, with damaged lines
// allowed between). An empty batch is a no-op.
//
// Entries are what a rollout cursor returns: Offset and Size are the line's
// place in the uncompressed mirror file, which the watermark records.
func (ix *Index) Apply(ctx context.Context, rolloutID string, batch []rollout.Entry) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.apply(ctx, rolloutID, batch)
}

func (ix *Index) apply(ctx context.Context, rolloutID string, batch []rollout.Entry) error {
	if len(batch) == 0 {
		return nil
	}
	if err := rollout.ValidateID("rollout_id", rolloutID); err != nil {
		return fmt.Errorf("%w: %v", ErrBadBatch, err)
	}
	if g := ix.grp; g != nil { // in a savepoint of the group's transaction
		if _, err := g.sqlTx.ExecContext(ctx, "SAVEPOINT apply"); err != nil {
			return err
		}
		touched := map[string]bool{}
		if err := ix.applyTx(ctx, g.tx, rolloutID, batch, touched); err != nil {
			g.sqlTx.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO apply")
			g.sqlTx.ExecContext(context.WithoutCancel(ctx), "RELEASE apply")
			return err
		}
		if _, err := g.sqlTx.ExecContext(ctx, "RELEASE apply"); err != nil {
			return err
		}
		for m := range touched {
			g.touched[m] = true
		}
		g.records += len(batch)
		return nil
	}
	sqlTx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	tx := ix.stmts.begin(sqlTx)
	defer ix.stmts.warm(ctx) // runs last, once the transaction is over
	defer sqlTx.Rollback()
	defer tx.close()
	touched := map[string]bool{}
	if err := ix.applyTx(ctx, tx, rolloutID, batch, touched); err != nil {
		return err
	}
	if !ix.deferJudge {
		if err := judge(ctx, tx, touched, ix.mutant); err != nil {
			return err
		}
	}
	faults.Point("index.mid-tx") // crash tests: die with the batch's rows written, not committed
	return sqlTx.Commit()
}

// applyTx writes a batch's rows in tx and adds the msg ids whose
// deliveries it changed to touched (judged by the caller).
func (ix *Index) applyTx(ctx context.Context, tx *stmtTx, rolloutID string, batch []rollout.Entry, touched map[string]bool) error {
	st, found, err := loadState(ctx, tx, rolloutID)
	if err != nil {
		return err
	}
	if !found {
		st.Lines = batch[0].Ordinal == 0
	}
	ords, err := checkBatch(&st, batch)
	if err != nil {
		return err
	}
	p := &projector{ctx: ctx, tx: tx, st: &st, dir: ix.mirror, touched: touched}
	for i := range batch {
		if err := p.record(&batch[i], ords[i]); err != nil {
			return err
		}
	}
	last := &batch[len(batch)-1]
	st.WmOrdinal, st.WmOffset, st.WmLastOffset, st.WmLastCRC = ords[len(ords)-1], last.End(), last.Offset, lineCRC(last)
	if err := p.finish(); err != nil {
		return err
	}
	if st.ThreadID != "" {
		if err := refreshThread(ctx, tx, st.ThreadID, p.touched); err != nil {
			return err
		}
	}
	if st.BasePending {
		ix.anyPending = true
	}
	return nil
}

// checkBatch checks that batch follows st's watermark and is in order, and
// returns each entry's ordinal (its line in a version-0 rollout).
func checkBatch(st *rolloutState, batch []rollout.Entry) ([]int64, error) {
	ords := make([]int64, len(batch))
	prevOrd, prevEnd := st.WmOrdinal, st.WmOffset
	for i := range batch {
		e := &batch[i]
		ord := e.Ordinal
		if st.Lines {
			if e.Ordinal != 0 {
				return nil, fmt.Errorf("%w: rollout %s has no ordinals, the entry at offset %d has ordinal %d", ErrBadBatch, st.RolloutID, e.Offset, e.Ordinal)
			}
			if e.Line <= 0 {
				return nil, fmt.Errorf("%w: rollout %s has no ordinals and the entry at offset %d no line number", ErrBadBatch, st.RolloutID, e.Offset)
			}
			ord = int64(e.Line)
		} else if ord == 0 {
			return nil, fmt.Errorf("%w: rollout %s has ordinals, the entry at offset %d has none", ErrBadBatch, st.RolloutID, e.Offset)
		}
		follows := ord == prevOrd+1 && e.Offset == prevEnd
		if st.Lines {
			follows = ord > prevOrd && e.Offset >= prevEnd
		}
		if !follows {
			if i == 0 {
				return nil, &OrderError{Rollout: st.RolloutID, Lines: st.Lines, Watermark: st.WmOrdinal, WatermarkOffset: st.WmOffset,
					First: ord, FirstOffset: e.Offset}
			}
			return nil, fmt.Errorf("%w: rollout %s: entry %d of the batch (%s %d, offset %d) does not follow %d (ending at offset %d)",
				ErrBadBatch, st.RolloutID, i, unit(st), ord, e.Offset, prevOrd, prevEnd)
		}
		if e.Size <= 0 {
			return nil, fmt.Errorf("%w: rollout %s: the entry at offset %d has no size", ErrBadBatch, st.RolloutID, e.Offset)
		}
		ords[i] = ord
		prevOrd, prevEnd = ord, e.End()
	}
	return ords, nil
}

func unit(st *rolloutState) string {
	if st.Lines {
		return "line"
	}
	return "ordinal"
}

// lineCRC is the CRC-32C of an entry's whole line (envelope and payload),
// kept with the watermark to check that the mirror still holds that line.
func lineCRC(e *rollout.Entry) string { return rollout.Checksum(e.Append(nil)) }
