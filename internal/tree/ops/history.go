package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

var (
	// ErrPaginated: rollback was asked of a paginated thread.
	ErrPaginated = errors.New("ops: the thread is paginated: rollback by marker is refused; use revert --before-turn")
	// ErrLegacy: revert was asked of a legacy thread.
	ErrLegacy = errors.New("ops: the thread is legacy: it rolls back by marker; use rollback N")
	// ErrActive: the thread's lease is held by a live writer.
	ErrActive = errors.New("ops: the thread is active")
	// ErrTooFewTurns: rollback N with fewer than N user turns in effect.
	// The marker would take out all of them: asked for that, it is refused
	// rather than done silently (ask for exactly that many).
	ErrTooFewTurns = errors.New("ops: fewer user turns in effect than asked to roll back")
)

// Result is a history operation's outcome: the thread's state afterwards and
// which turns changed.
type Result struct {
	Thread  string
	Rollout string // the current rollout afterwards
	Sealed  string // revert: the rollout replaced
	Base    *rollout.HistoryPosition
	// Undone lists the turns no longer in effect that were before.
	Undone []string
	State  *replay.State
}

// Rollback appends thread_rolled_back{n} to a legacy thread's current
// rollout, holding the thread's lease (so it fails on an active thread), and
// replays it.
func Rollback(ctx context.Context, bus *stream.Bus, thread string, n int64, holder string) (*Result, error) {
	src, err := Load(ctx, bus, thread)
	if err != nil {
		return nil, err
	}
	before, err := CheckRollback(src, n)
	if err != nil {
		return nil, err
	}
	lease, err := takeIdle(ctx, bus, thread, holder)
	if err != nil {
		return nil, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	w, err := bus.OpenWriter(ctx, lease, src.Current, stream.WriterOptions{})
	if err != nil {
		return nil, err
	}
	defer w.Close(context.WithoutCancel(ctx))
	b := rollout.Builder{Next: w.Next()}
	if _, err := w.Append(ctx, b.RolledBack(n)); err != nil {
		return nil, err
	}
	if err := w.Flush(ctx); err != nil {
		return nil, err
	}
	return afterwards(ctx, bus, thread, before)
}

// CheckRollback says whether rollback n may be appended to src's thread: a
// legacy thread this build can write, with at least n user turns in effect.
// It returns the turns before the rollback, for afterwards.
func CheckRollback(src *Source, n int64) ([]replay.TurnSpan, error) {
	thread := src.Thread
	if n < 1 {
		return nil, fmt.Errorf("ops: rollback %d: the number of user turns must be at least 1", n)
	}
	if src.Meta.Mode() == rollout.HistoryPaginated {
		return nil, fmt.Errorf("thread %s: %w", thread, ErrPaginated)
	}
	if src.Meta.SchemaVersion > rollout.Version {
		return nil, fmt.Errorf("thread %s: %w", thread, rollout.ErrReadOnly)
	}
	_, before, err := src.Timeline()
	if err != nil {
		return nil, err
	}
	var users []string
	for _, s := range before {
		if s.InEffect && s.User {
			users = append(users, s.TurnID)
		}
	}
	switch {
	case len(users) == 0:
		return nil, fmt.Errorf("thread %s: %w: it has none; nothing to roll back", thread, ErrTooFewTurns)
	case int64(len(users)) < n:
		return nil, fmt.Errorf("thread %s: %w: %d asked, %d in effect (%s); rollback %s %d takes them all out",
			thread, ErrTooFewTurns, n, len(users), strings.Join(users, ", "), thread, len(users))
	}
	return before, nil
}

// takeIdle takes a thread's lease, refusing an active thread.
func takeIdle(ctx context.Context, bus *stream.Bus, thread, holder string) (*stream.Lease, error) {
	lease, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: holder})
	var held *stream.LeaseHeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("%w: %w (wait for it to go idle)", ErrActive, err)
	}
	return lease, err
}

// afterwards reloads a thread and says which turns the operation took out of
// effect.
func afterwards(ctx context.Context, bus *stream.Bus, thread string, before []replay.TurnSpan) (*Result, error) {
	src, err := Load(ctx, bus, thread)
	if err != nil {
		return nil, err
	}
	st, after, err := src.Timeline()
	if err != nil {
		return nil, err
	}
	res := &Result{Thread: thread, Rollout: src.Current, State: st}
	if res.State, err = replay.Fast(src.View, replay.Options{}); err != nil {
		return nil, err
	}
	still := map[string]bool{}
	for _, s := range after {
		if s.InEffect {
			still[s.TurnID] = true
		}
	}
	for _, s := range before {
		if s.InEffect && !still[s.TurnID] {
			res.Undone = append(res.Undone, s.TurnID)
		}
	}
	return res, nil
}

// RevertPlan is a revert decided and not yet written.
type RevertPlan struct {
	src   *Source
	spans []replay.TurnSpan
	Base  rollout.HistoryPosition
	Next  string // the new rollout's id
}

// Revert replaces a paginated thread's current rollout by a new one whose
// history ends before a turn (PlanRevert then Commit).
func Revert(ctx context.Context, bus *stream.Bus, thread, beforeTurn string) (*Result, error) {
	p, err := PlanRevert(ctx, bus, thread, beforeTurn)
	if err != nil {
		return nil, err
	}
	return p.Commit(ctx, bus)
}

// PlanRevert reads the thread and decides the new rollout's history_base.
func PlanRevert(ctx context.Context, bus *stream.Bus, thread, beforeTurn string) (*RevertPlan, error) {
	src, err := Load(ctx, bus, thread)
	if err != nil {
		return nil, err
	}
	if src.Meta.Mode() != rollout.HistoryPaginated {
		return nil, fmt.Errorf("thread %s: %w", thread, ErrLegacy)
	}
	if beforeTurn == "" {
		return nil, fmt.Errorf("%w: revert needs --before-turn", ErrBadPosition)
	}
	_, spans, err := src.Timeline()
	if err != nil {
		return nil, err
	}
	_, end, err := viewEntries(src.View)
	if err != nil {
		return nil, err
	}
	pos, _, err := forkPoint(spans, end, beforeTurn, "")
	if err != nil {
		return nil, fmt.Errorf("thread %s: %w", thread, err)
	}
	base, err := src.basePosition(pos)
	if err != nil {
		return nil, err
	}
	return &RevertPlan{src: src, spans: spans, Base: base, Next: ulid.Make().String()}, nil
}

// Commit writes the new rollout, seals the old one fenced by the tail the
// plan read (ErrMoved when anything was appended since: nothing is switched,
// the new rollout is left for gc), and switches THREADS by compare-and-swap.
func (p *RevertPlan) Commit(ctx context.Context, bus *stream.Bus) (*Result, error) {
	src, thread := p.src, p.src.Thread
	meta := src.Meta
	base := p.Base
	meta.RolloutID, meta.HistoryBase, meta.ForkCopy, meta.SchemaVersion = p.Next, &base, nil, rollout.Version
	b := rollout.Builder{}
	if _, err := bus.AppendAt(ctx, p.Next, stream.Tail{}, b.Meta(meta), 0); err != nil {
		return nil, fmt.Errorf("ops: revert %s: write rollout %s: %w", thread, p.Next, err)
	}
	seal := rollout.Builder{Next: src.Tail.Ordinal + 1}
	sealRec := seal.Event(rollout.RolloutSealed{Type: rollout.EventRolloutSealed, SuccessorRolloutID: p.Next})
	if _, err := bus.AppendAt(ctx, src.Current, src.Tail, sealRec, 0); err != nil {
		if errors.Is(err, stream.ErrMoved) {
			return nil, fmt.Errorf("ops: revert %s: the thread moved on while reverting (an append or another revert won); nothing was switched, and rollout %s is left for gc: %w", thread, p.Next, err)
		}
		return nil, err
	}
	faults.Point("revert.after-seal")
	if err := switchPointer(ctx, bus, thread, src.Pointer, src.PointerRev, p.Next); err != nil {
		return nil, err
	}
	res, err := afterwards(ctx, bus, thread, p.spans)
	if err != nil {
		return nil, err
	}
	res.Sealed, res.Base = src.Current, &base
	return res, nil
}

// switchPointer moves THREADS[thread] from old to next by compare-and-swap;
// a pointer already at next is fine.
func switchPointer(ctx context.Context, bus *stream.Bus, thread, old string, rev uint64, next string) error {
	kv := bus.Threads()
	for attempt := 0; attempt < 5; attempt++ {
		var err error
		if rev == 0 {
			_, err = kv.Create(ctx, thread, []byte(next))
		} else {
			_, err = kv.Update(ctx, thread, []byte(next), rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			var api *jetstream.APIError
			if !errors.As(err, &api) || api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
				return fmt.Errorf("ops: switch THREADS %s to %s: %w", thread, next, err)
			}
		}
		e, gerr := kv.Get(ctx, thread)
		switch {
		case gerr == nil && string(e.Value()) == next:
			return nil
		case gerr == nil:
			rev = e.Revision() // followers may lag: re-read and retry the swap
			if string(e.Value()) != old {
				return fmt.Errorf("ops: THREADS %s now names %s, neither %s nor %s", thread, e.Value(), old, next)
			}
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			rev = 0
		default:
			return gerr
		}
	}
	return fmt.Errorf("ops: switch THREADS %s to %s: gave up after conflicting updates", thread, next)
}

// RollForward switches every THREADS pointer that names a sealed rollout to
// its successor (a revert that crashed between its seal and its switch). It
// returns the threads it moved.
func RollForward(ctx context.Context, bus *stream.Bus) ([]string, error) {
	keys, err := bus.Threads().ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ops: roll forward: %w", err)
	}
	var moved []string
	for thread := range keys.Keys() {
		e, err := bus.Threads().Get(ctx, thread)
		if err != nil {
			continue
		}
		cur := string(e.Value())
		end := cur
		for hops := 0; hops < 64; hops++ {
			last, _, err := bus.LastRecord(ctx, end)
			if err != nil || last.Type != rollout.TypeEventMsg || last.EventKind() != rollout.EventRolloutSealed {
				break
			}
			succ, _ := rollout.LookupString(last.Payload, "successor_rollout_id")
			if succ == "" {
				break
			}
			end = succ
		}
		if end == cur {
			continue
		}
		if err := switchPointer(ctx, bus, thread, cur, e.Revision(), end); err != nil {
			return moved, err
		}
		moved = append(moved, thread)
	}
	return moved, nil
}
