package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree"
)

// Imported is what import did with one file.
type Imported struct {
	Path      string `json:"path"`
	Thread    string `json:"thread_id,omitempty"`
	Rollout   string `json:"rollout_id,omitempty"`
	Records   int    `json:"records"`   // records the file holds (transient events and damage aside)
	Published int    `json:"published"` // records published now
	Skipped   string `json:"skipped,omitempty"`
	Damaged   int    `json:"damaged_lines,omitempty"`
	TornTail  string `json:"torn_tail,omitempty"` // the unterminated or unparsable last line left out, and why
	Err       string `json:"error,omitempty"`
}

// Import publishes every rollout file under dir (recursively; .jsonl and
// .jsonl.zst, Codex sessions included) into the bus: each record gets its
// ordinal and crc, its payload bytes and unknown fields unchanged; IDs are
// validated; transient events are left out; damaged lines are skipped and
// counted. Nothing is imported twice: a rollout the bus already holds is
// compared record by record (payload bytes) and only a missing suffix is
// published; a rollout that differs is an error for that file. THREADS
// learns each new thread's rollout. progress (may be nil) is called after
// each file. A file's failure is reported in its Imported and the import
// goes on, except when the bus is unavailable (stream.ErrBusUnavailable:
// no quorum, no server): then it stops at once with that error, instead of
// waiting as long for each file left.
func Import(ctx context.Context, bus *stream.Bus, dir, holder string, progress func(done, total int)) ([]Imported, error) {
	var out []Imported
	paths, err := tree.RolloutFiles(dir, func(p, why string) { out = append(out, Imported{Path: p, Err: "skipped: " + why}) })
	if err != nil {
		return nil, err
	}
	for i, p := range paths {
		im, err := importFile(ctx, bus, p, holder)
		out = append(out, im)
		if progress != nil {
			progress(i+1, len(paths))
		}
		if errors.Is(err, stream.ErrBusUnavailable) {
			// The bus, not this file: every later file would wait as long
			// to fail the same way.
			return out, fmt.Errorf("import: the bus stopped answering (no quorum, or no server reachable); stopped at %s with %d of %d files done: %w", p, i, len(paths), err)
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// importFile imports one file. The error is the file's failure (also in
// Imported.Err), or a bus that stopped answering while its lease was
// released (the file itself is imported): either stops the import when it
// is stream.ErrBusUnavailable.
func importFile(ctx context.Context, bus *stream.Bus, path, holder string) (Imported, error) {
	var release error
	im, err := importOne(ctx, bus, path, holder, &release)
	if err != nil {
		im.Err = err.Error()
		return im, err
	}
	return im, release
}

func importOne(ctx context.Context, bus *stream.Bus, path, holder string, release *error) (im Imported, err error) {
	im = Imported{Path: path}
	fail := func(err error) (Imported, error) { return im, err }
	log, err := rollout.OpenFile(path)
	if err != nil {
		return fail(err)
	}
	recs, damaged, torn, err := persistedRecords(log)
	im.Damaged, im.TornTail = damaged, torn
	if err != nil {
		return fail(err)
	}
	var meta *rollout.SessionMeta
	for i := range recs {
		if recs[i].Type == rollout.TypeSessionMeta {
			m, err := rollout.Decode[rollout.SessionMeta](&recs[i])
			if err != nil {
				return fail(fmt.Errorf("%s: %w", path, err))
			}
			if err := m.Validate(); err != nil {
				return fail(fmt.Errorf("%s: %w", path, err))
			}
			meta = &m
			break
		}
	}
	if meta == nil {
		return fail(fmt.Errorf("%s: %w", path, rollout.ErrNoSessionMeta))
	}
	if recs[0].Type != rollout.TypeSessionMeta {
		return fail(fmt.Errorf("%s: the first record is a %s, not the session_meta", path, recs[0].Type))
	}
	im.Thread, im.Rollout, im.Records = meta.ID, meta.Rollout(), len(recs)
	if meta.SchemaVersion > rollout.Version {
		return fail(fmt.Errorf("%s: %w", path, rollout.ErrReadOnly))
	}
	have, err := bus.ReadAll(ctx, im.Rollout, 1)
	if err != nil {
		return fail(err)
	}
	for i, h := range have {
		if i >= len(recs) || !bytes.Equal(h.Record.Payload, recs[i].Payload) || h.Record.Type != recs[i].Type {
			return fail(fmt.Errorf("%s: rollout %s is already on the bus and differs at ordinal %d: not imported", path, im.Rollout, i+1))
		}
	}
	if len(have) == len(recs) {
		im.Skipped = "already imported"
		return im, nil
	}
	lease, err := takeIdle(ctx, bus, im.Thread, holder)
	if err != nil {
		return fail(err)
	}
	defer func() { *release = lease.Release(context.WithoutCancel(ctx)) }()
	w, err := bus.OpenWriter(ctx, lease, im.Rollout, stream.WriterOptions{})
	if err != nil {
		return fail(err)
	}
	for i := len(have); i < len(recs); i++ {
		if _, err := w.Append(ctx, recs[i].Reenvelope(int64(i+1))); err != nil {
			w.Close(context.WithoutCancel(ctx))
			return fail(fmt.Errorf("%s record %d: %w", path, i+1, err))
		}
		im.Published++
	}
	w.Materialize()
	if err := w.Close(ctx); err != nil {
		return fail(err)
	}
	if _, err := bus.RecordThread(ctx, im.Thread, im.Rollout); err != nil {
		return fail(err)
	}
	return im, nil
}

// persistedRecords reads a file's records the writer would keep.
func persistedRecords(log rollout.Log) ([]rollout.Record, int, string, error) {
	cur, err := log.Forward(0)
	if err != nil {
		return nil, 0, "", err
	}
	var recs []rollout.Record
	damaged, torn := 0, ""
	err = rollout.Scan(cur, func(ce *rollout.CorruptionError) error {
		if ce.Torn() {
			torn = ce.Error()
		} else {
			damaged++
		}
		return nil
	}, func(e rollout.Entry) (bool, error) {
		if rollout.Persist(&e.Record) {
			recs = append(recs, e.Record)
		}
		return true, nil
	})
	if err != nil {
		return nil, damaged, torn, err
	}
	return recs, damaged, torn, nil
}
