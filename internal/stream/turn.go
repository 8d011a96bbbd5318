package stream

import (
	"context"
	"fmt"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// EndTurn ends a turn with the chapter's two barriers (DESIGN §5):
//
//  1. flush the turn's body, so everything before the terminal record is
//     acknowledged before anyone hears that the turn ended;
//  2. enqueue the terminal record (task_complete or turn_aborted);
//  3. announce (to a UI, a parent, ...), given the terminal's ordinal;
//  4. flush again, sealing the terminal record itself.
//
// A crash between 3 and 4 leaves an announced turn without its terminal
// record on the bus: readers trust the rollout, not the announcement. If the
// first flush fails nothing is enqueued or announced. It returns the
// terminal record's ordinal.
func (w *Writer) EndTurn(ctx context.Context, terminal rollout.Record, announce func(ordinal int64)) (int64, error) {
	if err := w.Flush(ctx); err != nil {
		return 0, fmt.Errorf("end turn: flush the body: %w", err)
	}
	ord, err := w.Append(ctx, terminal)
	if err != nil {
		return 0, fmt.Errorf("end turn: %w", err)
	}
	if announce != nil {
		announce(ord)
	}
	if err := w.Flush(ctx); err != nil {
		return ord, fmt.Errorf("end turn: flush the terminal record %d: %w", ord, err)
	}
	return ord, nil
}
