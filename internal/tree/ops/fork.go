package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// Fork modes.
const (
	ModeCopy      = "copy"
	ModeReference = "reference"
)

// ErrBadPosition is returned for a fork or revert point that is not a turn
// boundary of a turn in effect.
var ErrBadPosition = errors.New("ops: not a turn boundary of a turn in effect")

// NotUndone is said by every operation: conversation history is not the world.
const NotUndone = "Files, deployments, sent requests and other outside effects are NOT undone: only the history the thread's next session sees changed."

// ForkOptions choose where and how to fork.
type ForkOptions struct {
	BeforeTurn string // the prefix ends just before this turn
	AfterTurn  string // the prefix ends after this turn
	Mode       string // ModeCopy (default) or ModeReference
	Thread     string // the child's thread id; default a new ULID
	Rollout    string // the child's rollout id; default the thread id
	Holder     string // who writes (lease holder name)
}

// ForkResult says what a fork made.
type ForkResult struct {
	Thread, Rollout string
	From            string // the source thread
	FromRollout     string
	Mode            string
	// Position is where the shared prefix ends: for a reference fork the
	// history_base written; for a copy, the source's rollout and view offset.
	Position    rollout.HistoryPosition
	Copied      int    // records copied (copy mode)
	AbortedTurn string // an active turn at the fork point, aborted in the child
	State       *replay.State
}

// Fork creates a new thread from a position of src (see the package doc).
func Fork(ctx context.Context, bus *stream.Bus, src *Source, opt ForkOptions) (*ForkResult, error) {
	if opt.Mode == "" {
		opt.Mode = ModeCopy
	}
	if opt.Mode != ModeCopy && opt.Mode != ModeReference {
		return nil, fmt.Errorf("ops: fork mode %q: use copy or reference", opt.Mode)
	}
	if src.Meta.SchemaVersion > rollout.Version {
		return nil, fmt.Errorf("ops: thread %s: %w", src.Thread, rollout.ErrReadOnly)
	}
	entries, end, err := viewEntries(src.View)
	if err != nil {
		return nil, err
	}
	_, spans, err := src.Timeline()
	if err != nil {
		return nil, err
	}
	pos, open, err := forkPoint(spans, end, opt.BeforeTurn, opt.AfterTurn)
	if err != nil {
		return nil, fmt.Errorf("thread %s: %w", src.Thread, err)
	}
	res := &ForkResult{Thread: opt.Thread, Rollout: opt.Rollout, From: src.Thread, FromRollout: src.Current, Mode: opt.Mode}
	if res.Thread == "" {
		res.Thread = ulid.Make().String()
	}
	if res.Rollout == "" {
		// Named like its thread, a retried fork finds the rollout an
		// interrupted one left (FindUnrecorded).
		res.Rollout = res.Thread
	}
	switch _, err := bus.Threads().Get(ctx, res.Thread); {
	case err == nil:
		return nil, fmt.Errorf("ops: thread %s already exists", res.Thread)
	case !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
		return nil, fmt.Errorf("ops: THREADS %s: %w", res.Thread, err)
	}

	meta := rollout.SessionMeta{ID: res.Thread, RolloutID: res.Rollout, ForkedFromID: src.Thread, Source: rollout.Source{Kind: "fork"},
		Cwd: src.Meta.Cwd, AgentRole: src.Meta.AgentRole, HistoryMode: src.Meta.Mode(), SchemaVersion: rollout.Version}
	var prefix []rollout.Entry
	for _, e := range entries {
		if e.Offset < pos {
			prefix = append(prefix, e)
		}
	}
	if opt.Mode == ModeReference {
		base, err := src.basePosition(pos)
		if err != nil {
			return nil, err
		}
		meta.HistoryBase, res.Position = &base, base
	} else {
		res.Copied = len(prefix)
		res.Position = rollout.HistoryPosition{RolloutID: src.Current, EndOrdinalExclusive: int64(len(prefix) + 2), EndByteOffset: pos}
		copyPos := res.Position
		meta.ForkCopy = &copyPos
	}

	b := &rollout.Builder{}
	recs := []rollout.Record{b.Meta(meta)}
	if opt.Mode == ModeCopy {
		for _, e := range prefix {
			recs = append(recs, e.Record.Reenvelope(b.Next))
			b.Next++
		}
	}
	if open != nil {
		recs = append(recs, b.TurnAborted(open.TurnID, rollout.AbortInterrupted))
		res.AbortedTurn = open.TurnID
	}

	lease, err := bus.TakeLease(ctx, res.Thread, stream.LeaseOptions{Holder: opt.Holder})
	if err != nil {
		return nil, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	// A fork that died before its THREADS entry left (part of) this
	// rollout: finish it, or refuse a rollout id that holds anything else.
	u, err := FindUnrecorded(ctx, bus, res.Rollout)
	if err != nil {
		return nil, fmt.Errorf("ops: fork %s: %w", res.Thread, err)
	}
	if u != nil {
		if recs, err = u.Finish(recs); err != nil {
			return nil, fmt.Errorf("ops: fork %s: %w", res.Thread, err)
		}
	}
	w, err := bus.OpenWriter(ctx, lease, res.Rollout, stream.WriterOptions{})
	if err != nil {
		return nil, err
	}
	defer w.Close(context.WithoutCancel(ctx))
	for _, r := range recs {
		if _, err := w.Append(ctx, r); err != nil {
			return nil, fmt.Errorf("ops: fork %s: %w", res.Thread, err)
		}
	}
	w.Materialize()
	if err := w.Flush(ctx); err != nil {
		return nil, fmt.Errorf("ops: fork %s: %w", res.Thread, err)
	}
	if _, err := bus.Threads().Create(ctx, res.Thread, []byte(res.Rollout)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("ops: THREADS %s: %w", res.Thread, err)
	}
	child, err := Load(ctx, bus, res.Thread)
	if err != nil {
		return nil, err
	}
	if res.State, err = replay.Fast(child.View, replay.Options{}); err != nil {
		return nil, err
	}
	return res, nil
}

// viewEntries reads a view's records and the offset of its end.
func viewEntries(view rollout.Log) ([]rollout.Entry, int64, error) {
	cur, err := view.Forward(0)
	if err != nil {
		return nil, 0, err
	}
	var out []rollout.Entry
	var end int64
	err = rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		out = append(out, e)
		end = e.End()
		return true, nil
	})
	return out, end, err
}

// forkPoint finds where a prefix ends and the turn that is open there (in
// effect, started, no terminal event).
func forkPoint(spans []replay.TurnSpan, end int64, before, after string) (int64, *replay.TurnSpan, error) {
	pos := end
	if before != "" && after != "" {
		return 0, nil, fmt.Errorf("%w: give a turn to fork before or after, not both", ErrBadPosition)
	}
	if id := before + after; id != "" {
		i := -1
		for j, s := range spans {
			if s.TurnID == id {
				i = j
			}
		}
		switch {
		case i < 0:
			return 0, nil, fmt.Errorf("%w: no turn %s", ErrBadPosition, id)
		case !spans[i].InEffect:
			return 0, nil, fmt.Errorf("%w: turn %s was rolled back; a fork cannot resurrect it", ErrBadPosition, id)
		case before != "":
			pos = spans[i].Start
		case i+1 < len(spans):
			pos = spans[i+1].Start
		}
	}
	var open *replay.TurnSpan
	for j := range spans {
		if spans[j].Start < pos {
			open = &spans[j]
		}
	}
	if open != nil && (!open.InEffect || open.Terminal) {
		open = nil
	}
	return pos, open, nil
}
