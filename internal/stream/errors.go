package stream

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the writer. Each is returned wrapped with the rollout and, where
// there is one, the ordinal.
var (
	// ErrWrongOrdinal: a record carried an ordinal other than the next one.
	// Nothing was written.
	ErrWrongOrdinal = errors.New("stream: wrong ordinal")
	// ErrTooLarge: a record's line exceeds the record limit. Nothing was written.
	ErrTooLarge = errors.New("stream: record too large")
	// ErrInvalidRecord: a record that readers could not trust (bad JSON, a
	// newline inside the line, a crc that does not match, an invalid ID, a
	// canonical session_meta naming another thread or rollout). Nothing was
	// written. Invalid IDs also match rollout.ErrInvalidID.
	ErrInvalidRecord = errors.New("stream: invalid record")
	// ErrQueueFull: TryAppend found the writer's queue full.
	ErrQueueFull = errors.New("stream: writer queue full")
	// ErrClosed: the writer was closed.
	ErrClosed = errors.New("stream: writer closed")
	// ErrSealed: the rollout ends with rollout_sealed; nothing may follow.
	ErrSealed = errors.New("stream: rollout is sealed")
	// ErrFenced: the subject's tail holds bytes of another writer. A
	// *FencedError says whose.
	ErrFenced = errors.New("stream: fenced by another writer")
	// ErrLeaseLost: the lease was taken over, expired, or could not be
	// renewed in time. The writer stopped.
	ErrLeaseLost = errors.New("stream: lease lost")
	// ErrLeaseHeld: another holder's lease has not expired. A *LeaseHeldError
	// names it.
	ErrLeaseHeld = errors.New("stream: lease held by another writer")
	// ErrPublishFailing: publishes keep failing; the records are kept and
	// retried. A *PublishError says how long and why.
	ErrPublishFailing = errors.New("stream: publish failing")
	// ErrConfigMismatch: an existing stream or bucket has a configuration
	// that differs from what Logbook needs on a field that matters.
	ErrConfigMismatch = errors.New("stream: configuration mismatch")
	// ErrBusUnavailable: a bus call kept failing transiently (no leader, no
	// responders, timeouts) until the caller's deadline; on a cluster this
	// means quorum is gone, not a leader election.
	ErrBusUnavailable = errors.New("stream: bus unavailable")
)

// FencedError is returned once the writer found another writer's bytes where
// its own pack should be. The writer has stopped. StoredEpoch > Epoch means a
// newer lease holder took over (this writer is the zombie); StoredEpoch <
// Epoch means an older holder wrote after this writer read the tail: reopen
// and replay before writing again.
type FencedError struct {
	Rollout     string
	Ordinal     int64  // the first ordinal this writer tried to write
	Seq         uint64 // stream sequence of the foreign message
	StoredMsgID string
	StoredEpoch uint64 // 0 when the foreign message has no epoch
	Epoch       uint64 // this writer's epoch
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("%v: rollout %s ordinal %d: seq %d holds %q (epoch %d), this writer has epoch %d",
		ErrFenced, e.Rollout, e.Ordinal, e.Seq, e.StoredMsgID, e.StoredEpoch, e.Epoch)
}

func (e *FencedError) Unwrap() error { return ErrFenced }

// LeaseHeldError names the live holder of a lease a caller tried to take.
type LeaseHeldError struct {
	Thread  string
	Holder  string
	Epoch   uint64
	Expires time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v: thread %s is held by %q (epoch %d) until %s; take it over with force",
		ErrLeaseHeld, e.Thread, e.Holder, e.Epoch, e.Expires.UTC().Format(time.RFC3339Nano))
}

func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// PublishError reports publishes that keep failing. The writer keeps the
// records and retries: Temporary is true until the writer stops.
type PublishError struct {
	Rollout  string
	First    int64 // first unacknowledged ordinal
	Attempts int
	Since    time.Time
	Err      error // the last failure
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("%v: rollout %s from ordinal %d: %d attempts since %s: %v",
		ErrPublishFailing, e.Rollout, e.First, e.Attempts, e.Since.UTC().Format(time.RFC3339), e.Err)
}

func (e *PublishError) Unwrap() []error { return []error{ErrPublishFailing, e.Err} }

// Temporary reports that the records are kept and still being retried.
func (e *PublishError) Temporary() bool { return true }
