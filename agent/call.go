package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// CallSpec describes a tool call: a side effect in the world.
type CallSpec struct {
	// ID is the call id, unique in the thread; default a new ULID.
	ID string
	// Name is the tool's name.
	Name string
	// Arguments are the tool's arguments as text (usually JSON), logged
	// as given.
	Arguments string
	// IdempotencyKey names the effect's intent in the world (a payment
	// id, a file path and revision ...): after a crash the Prober is asked
	// about the call by it, and a retry keeps it so the world can refuse a
	// second execution. Calls without one can only be reconciled by a
	// person.
	IdempotencyKey string
}

// Effect runs a call's side effect and returns its output. It returns
// ErrOutcomeUnknown (wrapped or not) when it cannot tell whether the
// effect happened: then no output is logged and the call stays open for a
// Prober or a person. Any other error is the effect's known failure and is
// logged as the call's output.
type Effect func(ctx context.Context) (output string, err error)

// Call runs one side effect the chapter's way: the function_call (with its
// idempotency key) is logged and flushed before run is called, so a crash
// during the effect leaves a call the log knows about; the output is logged
// after. It returns the output, or run's error. If logging the call fails,
// run is not called.
func (u *Turn) Call(ctx context.Context, spec CallSpec, run Effect) (string, error) {
	id, err := u.StartCall(ctx, spec)
	if err != nil {
		return "", err
	}
	return u.finish(ctx, id, run)
}

// finish runs a logged call's effect and logs its output.
func (u *Turn) finish(ctx context.Context, id string, run Effect) (string, error) {
	out, runErr := run(ctx)
	switch {
	case errors.Is(runErr, ErrOutcomeUnknown):
		return "", fmt.Errorf("agent: thread %s call %s: %w", u.t.id, id, runErr)
	case runErr != nil:
		out = "error: " + runErr.Error()
	}
	if err := u.Output(ctx, id, out); err != nil {
		return "", errors.Join(runErr, err)
	}
	return out, runErr
}

// StartCall logs and flushes a function_call and returns its id: the
// effect may start once StartCall returns. Give its result with Output.
func (u *Turn) StartCall(ctx context.Context, spec CallSpec) (string, error) {
	if err := u.open(); err != nil {
		return "", err
	}
	t := u.t
	if spec.ID == "" {
		spec.ID = ulid.Make().String()
	}
	if err := rollout.ValidateID("call id", spec.ID); err != nil {
		return "", fmt.Errorf("agent: thread %s: %w", t.id, err)
	}
	if spec.Name == "" {
		return "", fmt.Errorf("agent: thread %s call %s: %w: a call needs a tool name", t.id, spec.ID, ErrInvalid)
	}
	if _, open := t.calls[spec.ID]; open || t.used[spec.ID] {
		return "", fmt.Errorf("agent: thread %s: %w: call id %s is already in the log", t.id, ErrInvalid, spec.ID)
	}
	if err := t.append(ctx, func(b *rollout.Builder) rollout.Record {
		return b.Call(spec.ID, spec.Name, spec.Arguments, spec.IdempotencyKey)
	}); err != nil {
		return "", err
	}
	if err := t.w.Flush(ctx); err != nil {
		return "", t.failed(err)
	}
	t.calls[spec.ID] = rollout.OpenCall{CallID: spec.ID, Name: spec.Name, IdempotencyKey: spec.IdempotencyKey, TurnID: u.id}
	t.used[spec.ID] = true
	return spec.ID, nil
}

// Output logs the output of a call this Thread started (enqueued: End or
// the next call flushes it). An id with no open call from this Thread is
// refused with ErrUnknownCall, writing nothing: a call left open by a
// crashed process is settled by reconciliation, never by an output.
func (u *Turn) Output(ctx context.Context, callID, output string) error {
	if err := u.open(); err != nil {
		return err
	}
	t := u.t
	if _, ok := t.calls[callID]; !ok {
		return fmt.Errorf("agent: thread %s: %w: %q (open: %s)", t.id, ErrUnknownCall, callID, t.openList())
	}
	if err := t.append(ctx, func(b *rollout.Builder) rollout.Record { return b.Output(callID, output) }); err != nil {
		return err
	}
	delete(t.calls, callID)
	return nil
}

// RetryCall runs again a call a Prober proved was never executed (Open's
// Resumed.Findings, outcome NotExecuted): a new function_call under the
// same idempotency key, logged and flushed before run, as Call does. Any
// other call id is refused with ErrNotProven, writing and running nothing:
// the package never re-runs an effect whose outcome is unknown.
func (u *Turn) RetryCall(ctx context.Context, provenCallID string, spec CallSpec, run Effect) (string, error) {
	if err := u.open(); err != nil {
		return "", err
	}
	t := u.t
	p, ok := t.proven[provenCallID]
	if !ok {
		return "", fmt.Errorf("agent: thread %s: call %q: %w", t.id, provenCallID, ErrNotProven)
	}
	if spec.IdempotencyKey == "" {
		spec.IdempotencyKey = p.IdempotencyKey
	}
	if spec.IdempotencyKey != p.IdempotencyKey {
		return "", fmt.Errorf("agent: thread %s: %w: a retry of %s keeps its idempotency key %q, not %q", t.id, ErrInvalid, provenCallID, p.IdempotencyKey, spec.IdempotencyKey)
	}
	if spec.Name == "" {
		spec.Name = p.Name
	}
	id, err := u.StartCall(ctx, spec)
	if err != nil {
		return "", err
	}
	delete(t.proven, provenCallID)
	return u.finish(ctx, id, run)
}

// openCalls are the calls without an output in the log: those this Thread
// started and those a resume left unknown.
func (t *Thread) openCalls() []rollout.OpenCall {
	out := make([]rollout.OpenCall, 0, len(t.calls)+len(t.inherited))
	out = append(out, t.inherited...)
	for _, c := range t.calls {
		out = append(out, c)
	}
	slices.SortFunc(out[len(t.inherited):], func(a, b rollout.OpenCall) int { return strings.Compare(a.CallID, b.CallID) })
	return out
}

func (t *Thread) openList() string {
	ids := make([]string, 0, len(t.calls))
	for id := range t.calls {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return "none"
	}
	slices.Sort(ids)
	return fmt.Sprint(ids)
}
