package index

import (
	"context"
	"database/sql"

	"github.com/logbook-agents/logbook/internal/faults"
)

// groupRecords is how many records a catch-up's transaction takes, over as
// many rollouts as it needs: most of a small batch's cost is its commit
// (the WAL frames of the pages every rollout touches) and the judging of
// its deliveries, which a group does once.
const groupRecords = 16384

// group is one SQLite transaction over several rollouts' batches. Each
// batch is applied inside a savepoint, so a batch refused (ErrBadBatch,
// ErrOutOfOrder ...) leaves nothing, as a batch of its own would; the
// deliveries the batches touched are judged once, at the commit.
// Guarded by Index.mu, like everything the writer does.
type group struct {
	sqlTx   *sql.Tx
	tx      *stmtTx
	touched map[string]bool
	records int
}

// beginGroup opens a group; ix.mu must be held, and no group be open.
func (ix *Index) beginGroup(ctx context.Context) error {
	sqlTx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	ix.grp = &group{sqlTx: sqlTx, tx: ix.stmts.begin(sqlTx), touched: map[string]bool{}}
	return nil
}

// commitGroup judges what the group's batches touched and commits it.
func (ix *Index) commitGroup(ctx context.Context) error {
	g := ix.grp
	ix.grp = nil
	defer ix.stmts.warm(ctx)
	defer g.sqlTx.Rollback()
	defer g.tx.close()
	if !ix.deferJudge {
		if err := judge(ctx, g.tx, g.touched, ix.mutant); err != nil {
			return err
		}
	}
	faults.Point("index.mid-tx") // crash tests: die with the group's rows written, not committed
	return g.sqlTx.Commit()
}

// abortGroup rolls an open group back (nothing of it is kept).
func (ix *Index) abortGroup() {
	if g := ix.grp; g != nil {
		ix.grp = nil
		g.tx.close()
		g.sqlTx.Rollback()
	}
}

// q is what the writer reads with: the open group's transaction (which holds
// the writer's one connection), else the DB.
func (ix *Index) q() queryer {
	if ix.grp != nil {
		return ix.grp.tx
	}
	return ix.db
}
