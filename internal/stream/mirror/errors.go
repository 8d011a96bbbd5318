package mirror

import "errors"

var (
	// ErrState: mirror.state is not a watermark this mirror can read.
	ErrState = errors.New("mirror: unreadable watermark")
	// ErrAheadOfBus: the watermark is past the end of ROLLOUTS, or belongs to
	// another ROLLOUTS stream: the mirror would hold what the bus does not.
	// The mirror does not start; see docs/DURABILITY.md for how to rebuild it.
	ErrAheadOfBus = errors.New("mirror: watermark ahead of the bus")
)
