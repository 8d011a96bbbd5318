package index

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Shown is a thread's state replayed from its current rollout's mirror file,
// with what the index says about it.
type Shown struct {
	Thread  Thread
	Rollout Rollout // the index's row of the current rollout
	Path    string  // its mirror file
	State   *replay.State
	// Stale lists the ways the index disagrees with the mirror: it lags, its
	// checkpoint locator is wrong, or its turns differ from replay's. A
	// stale index is a warning, never a failure: the mirror is the truth.
	Stale []string
}

// ErrNoMirrorFile: the index names a rollout the mirror has no file for.
var ErrNoMirrorFile = errors.New("index: no mirror file")

// Show replays thread id (or a unique id prefix) of data dir dir with
// replay.Fast, which reads the tail of the mirror file backward to the newest
// checkpoint in effect. The index's checkpoint locator is a checked hint: the
// record it points at must be that checkpoint, and the current window of
// turns replay found must be the one the locator implies, with the same
// statuses; any difference is reported in Stale.
func Show(ctx context.Context, r *Reader, dir, id string, opt replay.Options) (*Shown, error) {
	t, err := r.Thread(ctx, id)
	if err != nil {
		return nil, err
	}
	ro, found, err := r.Rollout(ctx, t.CurrentRolloutID)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("index: thread %s: its current rollout %s is not indexed (reindex)", t.ID, t.CurrentRolloutID)
	}
	path := datadir.MirrorPath(dir, ro.ID)
	if path == "" {
		return nil, fmt.Errorf("%w: thread %s: rollout %s has no file in %s (the index is stale; reindex)", ErrNoMirrorFile, t.ID, ro.ID, dir)
	}
	f, err := rollout.OpenFile(path)
	if err != nil {
		return nil, err
	}
	// A fork by reference or a revert is read as its view: its own records
	// after the frozen prefix of the rollouts its history_base names.
	view, err := rollout.OpenView(ro.ID, mirrorHeads(dir, ro.ID, f))
	if err != nil {
		return nil, fmt.Errorf("index: thread %s: %w", t.ID, err)
	}
	st, err := replay.Fast(view, opt)
	if err != nil {
		return nil, err
	}
	s := &Shown{Thread: t, Rollout: ro, Path: path, State: st}
	lag, err := tailLag(f, ro)
	if err != nil {
		return nil, err
	}
	if lag != "" {
		s.Stale = append(s.Stale, lag)
		return s, nil // turns and checkpoint may differ for good reason
	}
	if view != rollout.Log(f) {
		// The locator and the turns the index keeps are the rollout's own,
		// in its own file's offsets; the view's state has no row to match.
		return s, nil
	}
	if msg, err := checkLocator(f, ro); err != nil {
		return nil, err
	} else if msg != "" {
		s.Stale = append(s.Stale, msg)
	}
	// Replay names the checkpoint it started from: it must be the locator's.
	indexed, replayed := ro.CheckpointOrdinal != 0, st.Replay.CheckpointOffset >= 0
	if indexed != replayed || (indexed && ro.CheckpointOffset != st.Replay.CheckpointOffset) {
		s.Stale = append(s.Stale, fmt.Sprintf("the index's checkpoint locator (offset %d) is not the checkpoint replay started from (offset %d)",
			ro.CheckpointOffset, st.Replay.CheckpointOffset))
	}
	turns, err := r.Turns(ctx, ro.ID)
	if err != nil {
		return nil, err
	}
	if msg := compareWindow(windowOf(turns, ro.CheckpointOrdinal), st.Turns); msg != "" {
		s.Stale = append(s.Stale, msg)
	}
	return s, nil
}

// tailLag compares the watermark with the mirror file's last record.
func tailLag(f *rollout.File, ro Rollout) (string, error) {
	cur, err := f.Backward()
	if err != nil {
		return "", err
	}
	defer cur.Close()
	var end int64
	var ord int64
	for {
		e, err := cur.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var ce *rollout.CorruptionError
		if errors.As(err, &ce) {
			continue
		}
		if err != nil {
			return "", err
		}
		end, ord = e.End(), e.Ordinal
		break
	}
	switch {
	case end > ro.WatermarkOffset && ro.Lines:
		return fmt.Sprintf("the index lags the mirror: it holds rollout %s to offset %d, the mirror file to offset %d", ro.ID, ro.WatermarkOffset, end), nil
	case end > ro.WatermarkOffset:
		return fmt.Sprintf("the index lags the mirror: it holds rollout %s to ordinal %d, the mirror file to ordinal %d", ro.ID, ro.WatermarkOrdinal, ord), nil
	case end < ro.WatermarkOffset:
		return fmt.Sprintf("the index is ahead of the mirror: it holds rollout %s to offset %d, the mirror file ends at %d", ro.ID, ro.WatermarkOffset, end), nil
	}
	return "", nil
}

// checkLocator checks that the index's checkpoint locator points at a
// compaction with a replacement history (and, with ordinals, the right one).
func checkLocator(f *rollout.File, ro Rollout) (string, error) {
	if ro.CheckpointOrdinal == 0 {
		return "", nil
	}
	bad := fmt.Sprintf("the index's checkpoint locator (%s %d, offset %d) does not point at a checkpoint in the mirror file",
		unitOf(ro.Lines), ro.CheckpointOrdinal, ro.CheckpointOffset)
	cur, err := f.Forward(ro.CheckpointOffset)
	if err != nil {
		return bad, nil
	}
	defer cur.Close()
	e, err := cur.Next()
	if err != nil || e.Offset != ro.CheckpointOffset || e.Type != rollout.TypeCompacted || (!ro.Lines && e.Ordinal != ro.CheckpointOrdinal) {
		return bad, nil
	}
	if rh := rollout.Lookup(e.Payload, "replacement_history"); rh == nil || string(rh) == "null" {
		return bad, nil
	}
	return "", nil
}

// windowOf returns the turns replay lists for a rollout whose newest
// checkpoint in effect is at ordinal cp (0: none): from the newest turn in
// effect that starts before it, else from the first turn after it.
func windowOf(turns []Turn, cp int64) []Turn {
	if cp == 0 {
		return turns
	}
	k := -1
	for i, t := range turns {
		if !t.RolledBack && t.StartOrdinal < cp {
			k = i
		}
	}
	if k >= 0 {
		return turns[k:]
	}
	for i, t := range turns {
		if t.StartOrdinal > cp {
			return turns[i:]
		}
	}
	return nil
}

// compareWindow reports the first difference between the index's window of
// turns and replay's.
func compareWindow(idx []Turn, rep []replay.Turn) string {
	if len(idx) != len(rep) {
		first := func(n int, id func() string) string {
			if n == 0 {
				return "none"
			}
			return id()
		}
		return fmt.Sprintf("the index is stale: replay's current window has %d turns (from %s), the index's checkpoint implies %d (from %s)",
			len(rep), first(len(rep), func() string { return rep[0].TurnID }), len(idx), first(len(idx), func() string { return idx[0].TurnID }))
	}
	for i := range idx {
		a, b := idx[i], rep[i]
		if a.TurnID != b.TurnID || a.Status != b.Status || a.Reason != b.Reason || a.User != b.User {
			return fmt.Sprintf("the index is stale: turn %s is %s (user %v) in the index, replay has %s %s (user %v)",
				a.TurnID, statusText(a.Status, a.Reason), a.User, b.TurnID, statusText(b.Status, b.Reason), b.User)
		}
	}
	return ""
}

func statusText(status, reason string) string {
	if reason != "" {
		return status + " (" + reason + ")"
	}
	return status
}

// mirrorHeads gives rollout.OpenView the mirror files of data dir dir, with
// own (already open) for rollout id.
func mirrorHeads(dir, id string, own *rollout.File) func(string) (rollout.Head, error) {
	return func(rid string) (rollout.Head, error) {
		f := own
		if rid != id {
			path := datadir.MirrorPath(dir, rid)
			if path == "" {
				return rollout.Head{}, fmt.Errorf("%w: rollout %s (a history_base) has no file in %s", ErrNoMirrorFile, rid, dir)
			}
			var err error
			if f, err = rollout.OpenFile(path); err != nil {
				return rollout.Head{}, err
			}
		}
		return rollout.ReadHead(f)
	}
}
