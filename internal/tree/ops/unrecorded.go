package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// ErrOtherCreate: a create found its rollout id holding records that are
// not the ones it would write (another thread's, or the same thread made
// with other settings): it writes nothing.
var ErrOtherCreate = errors.New("ops: the rollout id holds another create's records")

// Unrecorded is what a create (an agent's new thread, a fork) leaves on the
// bus when it dies after flushing some of the new thread's first records and
// before writing its THREADS entry: a rollout that no THREADS entry names.
// A create retried with the same ids reads it with FindUnrecorded and
// finishes it (Finish) instead of starting a second rollout for the thread,
// which the tree would report as duplicate_thread.
type Unrecorded struct {
	Rollout string
	Records []rollout.Record // as stored, the canonical session_meta first
}

// FindUnrecorded reads rolloutID from the bus for a create: nil when the
// bus holds no record of it. Call it holding the new thread's lease, so
// nobody writes the rollout meanwhile; Finish judges what it holds.
func FindUnrecorded(ctx context.Context, bus *stream.Bus, rolloutID string) (*Unrecorded, error) {
	if _, tail, err := bus.LastRecord(ctx, rolloutID); err != nil {
		return nil, err
	} else if tail.Seq == 0 {
		return nil, nil
	}
	entries, err := bus.ReadAll(ctx, rolloutID, 1)
	if err != nil {
		return nil, err
	}
	u := &Unrecorded{Rollout: rolloutID}
	for _, e := range entries {
		u.Records = append(u.Records, e.Record)
	}
	if len(u.Records) == 0 {
		return nil, nil // junk only: nothing valid was written
	}
	return u, nil
}

// Finish checks that u is a prefix of what the create would write (recs,
// the canonical session_meta first, compared by its decoded fields: the
// same thread, parent, fork point and settings; the others by type and
// payload bytes) and returns the records still to write. A longer rollout, or another session_meta, is
// ErrOtherCreate naming the difference.
func (u *Unrecorded) Finish(recs []rollout.Record) ([]rollout.Record, error) {
	if len(u.Records) > len(recs) {
		return nil, fmt.Errorf("%w: rollout %s holds %d records, a create writes %d (open the thread instead)", ErrOtherCreate, u.Rollout, len(u.Records), len(recs))
	}
	got, err := metaJSON(u.Records[0])
	if err != nil {
		return nil, fmt.Errorf("%w: rollout %s ordinal 1: %v", ErrOtherCreate, u.Rollout, err)
	}
	want, err := metaJSON(recs[0])
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(got, want) {
		return nil, fmt.Errorf("%w: rollout %s starts with session_meta %s, this create's is %s", ErrOtherCreate, u.Rollout, got, want)
	}
	for i, r := range u.Records[1:] {
		if w := recs[i+1]; r.Type != w.Type || !bytes.Equal(r.Payload, w.Payload) {
			return nil, fmt.Errorf("%w: rollout %s ordinal %d is another record (a %s) than this create's (a %s)", ErrOtherCreate, u.Rollout, i+2, r.Type, w.Type)
		}
	}
	return recs[len(u.Records):], nil
}

// metaJSON is a session_meta's payload re-encoded, so two metas compare
// whatever their key order or spacing.
func metaJSON(r rollout.Record) ([]byte, error) {
	if r.Type != rollout.TypeSessionMeta {
		return nil, fmt.Errorf("a %s, not a session_meta", r.Type)
	}
	m, err := rollout.Decode[rollout.SessionMeta](&r)
	if err != nil {
		return nil, err
	}
	if m.SchemaVersion == 0 {
		m.SchemaVersion = rollout.Version
	}
	return json.Marshal(m)
}
