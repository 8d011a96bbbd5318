package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

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

// ImportParallel is how many files Import publishes at once by default.
const ImportParallel = 16

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
//
// Files are imported ImportParallel at a time (ImportWith sets it): the
// files of one thread one after another, in path order, under that
// thread's lease (one writer per thread, as ever); different threads at
// once. The results are in path order whatever finished first.
func Import(ctx context.Context, bus *stream.Bus, dir, holder string, progress func(done, total int)) ([]Imported, error) {
	return ImportWith(ctx, bus, dir, ImportOptions{Holder: holder, Progress: progress})
}

// ImportOptions tune ImportWith.
type ImportOptions struct {
	Holder   string                // the lease holder's name
	Progress func(done, total int) // called after each file (may be nil); never concurrently
	Parallel int                   // files at once; default ImportParallel, 1 for one after another
}

// ImportWith is Import with options.
func ImportWith(ctx context.Context, bus *stream.Bus, dir string, o ImportOptions) ([]Imported, error) {
	if o.Parallel <= 0 {
		o.Parallel = ImportParallel
	}
	var out []Imported
	paths, err := tree.RolloutFiles(dir, func(p, why string) { out = append(out, Imported{Path: p, Err: "skipped: " + why}) })
	if err != nil {
		return nil, err
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	results := make([]*Imported, len(paths))
	var mu sync.Mutex // guards done, stopped, results and the progress calls
	done := 0
	var stopped error
	threads := newThreadLocks()
	groups := threadGroups(paths)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(o.Parallel, len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				g := int(next.Add(1)) - 1
				if g >= len(groups) {
					return
				}
				for _, i := range groups[g] {
					if ictx.Err() != nil {
						return
					}
					im, err := importFile(ictx, bus, paths[i], o.Holder, threads)
					mu.Lock()
					results[i] = &im
					done++
					if o.Progress != nil {
						o.Progress(done, len(paths))
					}
					if errors.Is(err, stream.ErrBusUnavailable) && stopped == nil {
						// The bus, not this file: every later file would wait
						// as long to fail the same way.
						stopped = fmt.Errorf("import: the bus stopped answering (no quorum, or no server reachable); stopped at %s with %d of %d files done: %w", paths[i], done-1, len(paths), err)
						stop()
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for _, im := range results {
		if im != nil {
			out = append(out, *im)
		}
	}
	if stopped != nil {
		return out, stopped
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	return out, nil
}

// threadGroups groups the files (indexes into paths) by the thread their
// first record names, in path order within a group, groups ordered by
// their first file. A file whose head cannot be read is a group of its own
// (its import says why it fails).
func threadGroups(paths []string) [][]int {
	heads := make([]string, len(paths))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(paths) {
					return
				}
				heads[i] = headThread(paths[i])
			}
		}()
	}
	wg.Wait()
	var groups [][]int
	at := map[string]int{}
	for i, th := range heads {
		g, ok := at[th]
		if !ok || th == "" {
			g = len(groups)
			groups = append(groups, nil)
			if th != "" {
				at[th] = g
			}
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// headThread is the thread id of a file's first valid record when it is a
// session_meta ("" otherwise).
func headThread(path string) string {
	log, err := rollout.OpenFile(path)
	if err != nil {
		return ""
	}
	cur, err := log.Forward(0)
	if err != nil {
		return ""
	}
	defer cur.Close()
	for range 64 {
		e, err := cur.Next()
		var ce *rollout.CorruptionError
		switch {
		case errors.As(err, &ce):
			continue
		case err != nil:
			return ""
		case !rollout.Persist(&e.Record):
			continue
		case e.Type != rollout.TypeSessionMeta:
			return ""
		}
		m, err := rollout.Decode[rollout.SessionMeta](&e.Record)
		if err != nil {
			return ""
		}
		return m.ID
	}
	return ""
}

// threadLocks serialize the imports of one thread in this process: files
// the head grouping put apart (a damaged head) still never take the same
// lease at once.
type threadLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func newThreadLocks() *threadLocks { return &threadLocks{locks: map[string]*sync.Mutex{}} }

func (t *threadLocks) lock(thread string) func() {
	t.mu.Lock()
	l, ok := t.locks[thread]
	if !ok {
		l = &sync.Mutex{}
		t.locks[thread] = l
	}
	t.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// importFile imports one file. The error is the file's failure (also in
// Imported.Err), or a bus that stopped answering while its lease was
// released (the file itself is imported): either stops the import when it
// is stream.ErrBusUnavailable.
func importFile(ctx context.Context, bus *stream.Bus, path, holder string, threads *threadLocks) (Imported, error) {
	var release error
	im, err := importOne(ctx, bus, path, holder, threads, &release)
	if err != nil {
		im.Err = err.Error()
		return im, err
	}
	return im, release
}

func importOne(ctx context.Context, bus *stream.Bus, path, holder string, threads *threadLocks, release *error) (im Imported, err error) {
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
	defer threads.lock(im.Thread)()
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
	var w *stream.Writer
	if len(have) == 0 {
		// ReadAll found no message: the writer checks that the subject is
		// still empty (one get) instead of reading the tail again.
		w, err = bus.OpenWriterAt(ctx, lease, im.Rollout, stream.KnownTail{}, stream.WriterOptions{})
	} else {
		w, err = bus.OpenWriter(ctx, lease, im.Rollout, stream.WriterOptions{})
	}
	if err != nil {
		return fail(err)
	}
	// Whole chunks at once: the writer packs what is queued when it
	// publishes, so a rollout of up to a chunk goes out as one message.
	w.Materialize()
	for i := len(have); i < len(recs); i += importChunk {
		chunk := make([]rollout.Record, 0, min(importChunk, len(recs)-i))
		for j := i; j < len(recs) && j < i+importChunk; j++ {
			chunk = append(chunk, recs[j].Reenvelope(int64(j+1)))
		}
		if _, err := w.AppendAll(ctx, chunk...); err == nil {
			im.Published += len(chunk)
			continue
		}
		// Refused as a whole (nothing of it was queued): append it record
		// by record to publish what comes before the record at fault and
		// name it, as one record at a time would.
		for j, r := range chunk {
			if _, err := w.Append(ctx, r); err != nil {
				w.Close(context.WithoutCancel(ctx))
				return fail(fmt.Errorf("%s record %d: %w", path, i+j+1, err))
			}
			im.Published++
		}
	}
	if err := w.Close(ctx); err != nil {
		return fail(err)
	}
	if _, err := bus.RecordThread(ctx, im.Thread, im.Rollout); err != nil {
		return fail(err)
	}
	return im, nil
}

// importChunk is how many records import queues at once.
const importChunk = 2048

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
