package agent

import (
	"errors"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// Errors. Every error the package returns wraps one of these (test with
// errors.Is) and names the thread, rollout, ordinal or id it is about. A call
// that returns one of the "nothing written" errors wrote nothing.
var (
	// ErrLeaseHeld: another holder's lease on the thread is live. A
	// *LeaseHeldError names it and says when it expires. Nothing written.
	ErrLeaseHeld = stream.ErrLeaseHeld
	// ErrLeaseLost: this process's lease was taken over or expired; the
	// thread's writer has stopped and the Thread is unusable. Open the
	// thread again (it resumes) to go on.
	ErrLeaseLost = stream.ErrLeaseLost
	// ErrFenced: another writer's records are where this one's would go.
	// A *FencedError says whose. The Thread is unusable.
	ErrFenced = stream.ErrFenced
	// ErrTooLarge: a record over the bus's record limit. Nothing written.
	ErrTooLarge = stream.ErrTooLarge
	// ErrInvalid: a record readers could not trust (bad JSON, an invalid
	// id). Nothing written.
	ErrInvalid = stream.ErrInvalidRecord
	// ErrInvalidID: an id that is not a valid Logbook id (also matches
	// ErrInvalid where a record was refused for it). Nothing written.
	ErrInvalidID = rollout.ErrInvalidID
	// ErrThreadExists: StartRoot or Spawn of a thread id already on the
	// bus (open it instead). Nothing written.
	ErrThreadExists = errors.New("agent: thread exists")
	// ErrClosed: the Thread was closed.
	ErrClosed = errors.New("agent: thread closed")
	// ErrNoTurn: a turn record outside a turn. Nothing written.
	ErrNoTurn = errors.New("agent: no turn is open")
	// ErrTurnOpen: a turn began while another is open. Nothing written.
	ErrTurnOpen = errors.New("agent: a turn is already open")
	// ErrUnknownCall: an output for a call id this thread has no open
	// call for. Nothing written.
	ErrUnknownCall = errors.New("agent: no open call with that id")
	// ErrNotProven: a retry of a call that no probe proved was never
	// executed. Nothing written, nothing run.
	ErrNotProven = errors.New("agent: the call was not proven not executed")
	// ErrOutcomeUnknown is for a call's effect to return when it cannot
	// tell whether the effect happened (a timeout after the request left):
	// no output is logged, the call stays unknown, and a later resume asks
	// the Prober about it.
	ErrOutcomeUnknown = errors.New("agent: the effect's outcome is unknown")
)

// LeaseHeldError names the live holder of a thread's lease.
type LeaseHeldError = stream.LeaseHeldError

// FencedError says whose records fenced a writer.
type FencedError = stream.FencedError
