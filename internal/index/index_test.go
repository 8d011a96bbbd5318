package index

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestIncrementalEqualsRebuilt indexes one data dir three ways and compares
// every row: a cold rebuild; Apply in random small batches, interleaving the
// rollouts; and catch-up over mirror files that grow a piece at a time (cut
// anywhere, torn lines included).
func TestIncrementalEqualsRebuilt(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	dir := fullDataDir(t, short(12, 4), short(6, 2), short(300, 150))
	rebuild(t, dir)
	maxBatch := short(40, 200)
	files, err := datadir.MirrorFiles(dir)
	if err != nil {
		t.Fatal(err)
	}

	// Apply in batches of 1 to 40 records, rollouts interleaved.
	applied := filepath.Join(t.TempDir(), "applied.db")
	ix, err := OpenFile(ctx, applied, Options{Mirror: dir})
	if err != nil {
		t.Fatal(err)
	}
	type feed struct {
		id      string
		entries []rollout.Entry
	}
	var feeds []*feed
	for _, f := range files {
		feeds = append(feeds, &feed{id: f.RolloutID, entries: entriesOf(t, f.Path)})
	}
	for len(feeds) > 0 {
		i := rng.IntN(len(feeds))
		f := feeds[i]
		n := min(1+rng.IntN(maxBatch), len(f.entries))
		if err := ix.Apply(ctx, f.id, f.entries[:n]); err != nil {
			t.Fatalf("apply %s: %v", f.id, err)
		}
		if f.entries = f.entries[n:]; len(f.entries) == 0 {
			feeds = append(feeds[:i], feeds[i+1:]...)
		}
	}
	ix.Close()
	sameRows(t, datadir.IndexPath(dir), applied)

	// A mirror whose files grow by random cuts, with a catch-up after each.
	grow := t.TempDir()
	ixg := openDir(t, grow)
	ixg.batch = short(7, 64)
	type growing struct {
		id   string
		data []byte
		at   int
	}
	var gs []*growing
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, &growing{id: f.RolloutID, data: data})
	}
	for len(gs) > 0 {
		i := rng.IntN(len(gs))
		g := gs[i]
		g.at = min(g.at+1+rng.IntN(len(g.data)/5+1), len(g.data)) // cut anywhere, about ten steps a file
		writeMirrorFile(t, grow, g.id, g.data[:g.at])
		if rng.IntN(8) == 0 {
			catchUp(t, ixg)
		} else if _, err := ixg.CatchUpRollout(ctx, g.id); err != nil {
			t.Fatalf("catch up %s: %v", g.id, err)
		}
		if g.at == len(g.data) {
			gs = append(gs[:i], gs[i+1:]...)
		}
	}
	catchUp(t, ixg)
	ixg.Close()
	sameRows(t, datadir.IndexPath(dir), datadir.IndexPath(grow))

	// And the rebuilt index holds every kind of row.
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, table := range []string{"threads", "rollouts", "turns", "items", "edges", "messages", "settings", "checkpoints"} {
		if count(t, r.db, "SELECT count(*) FROM "+table) == 0 {
			t.Errorf("table %s is empty", table)
		}
	}
	if n := count(t, r.db, "SELECT count(*) FROM turns WHERE rolled_back = 1"); n == 0 {
		t.Error("no rolled-back turn indexed")
	}
}

// TestOutOfOrderBatchRefused: a batch that does not follow the watermark
// is refused with a typed error and leaves every row as it was.
func TestOutOfOrderBatchRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	genRollouts(t, dir, 7, 1, 120, false)
	es := entriesOf(t, datadir.MirrorPath(dir, "rollout-7"))
	path := filepath.Join(t.TempDir(), "x.db")
	ix, err := OpenFile(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Apply(ctx, "rollout-7", es[:40]); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	if _, err := ix.db.ExecContext(ctx, "VACUUM INTO ?", snap); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		batch  []rollout.Entry
		behind bool
		want   error
	}{
		{"gap", es[41:60], false, ErrOutOfOrder},
		{"repeat", es[30:60], true, ErrOutOfOrder},
		{"from the start", es[:10], true, ErrOutOfOrder},
		{"hole inside", append(append([]rollout.Entry{}, es[40:45]...), es[46:50]...), false, ErrBadBatch},
		{"no ordinal", []rollout.Entry{{Record: rollout.Record{Type: "event_msg", Payload: []byte(`{}`)}, Offset: es[40].Offset, Size: 3}}, false, ErrBadBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ix.Apply(ctx, "rollout-7", tc.batch)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			var oe *OrderError
			if errors.As(err, &oe) && oe.Behind() != tc.behind {
				t.Errorf("Behind() = %v, want %v (%v)", oe.Behind(), tc.behind, err)
			}
			sameRows(t, snap, path)
		})
	}
	if err := ix.Apply(ctx, "rollout-7", es[40:]); err != nil {
		t.Fatalf("the batch that follows: %v", err)
	}
	ro, _, err := ix.Rollout(ctx, "rollout-7")
	if err != nil {
		t.Fatal(err)
	}
	if last := es[len(es)-1]; ro.WatermarkOrdinal != last.Ordinal || ro.WatermarkOffset != last.End() {
		t.Errorf("watermark %d@%d, want %d@%d", ro.WatermarkOrdinal, ro.WatermarkOffset, last.Ordinal, last.End())
	}
}

// TestWrongRolloutRefused: a file whose session_meta names another rollout
// is not indexed under the file's name.
func TestWrongRolloutRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	genRollouts(t, dir, 3, 1, 50, false)
	data, _ := os.ReadFile(datadir.MirrorPath(dir, "rollout-3"))
	writeMirrorFile(t, dir, "rollout-other", data)
	ix := openDir(t, dir)
	rep := catchUp(t, ix)
	if len(rep.Problems) != 1 || !errors.Is(rep.Problems[0], ErrWrongRollout) {
		t.Fatalf("problems %v, want one ErrWrongRollout", rep.Problems)
	}
	if _, found, _ := ix.Rollout(ctx, "rollout-other"); found {
		t.Error("rollout-other indexed")
	}
}

// TestCapAtStartup: after the mirror lost a suffix of one file, all of
// another and had a third rewritten, Open leaves no watermark beyond the
// mirror and catch-up gets back to a rebuild's rows.
func TestCapAtStartup(t *testing.T) {
	ctx := context.Background()
	dir := genDataDir(t, 4, 2, short(200, 100))
	ix := openDir(t, dir)
	catchUp(t, ix)
	ix.Close()

	cut := datadir.MirrorPath(dir, "rollout-2")
	es := entriesOf(t, cut)
	if err := os.Truncate(cut, es[len(es)/2].Offset); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(datadir.MirrorPath(dir, "rollout-3")); err != nil {
		t.Fatal(err)
	}
	// Same length, other bytes: a record replaced in place.
	other := datadir.MirrorPath(dir, "rollout-4")
	data, _ := os.ReadFile(other)
	last := entriesOf(t, other)
	lastRec := last[len(last)-1]
	copy(data[lastRec.Offset:], []byte(`{"timestamp":"2026-11-29T00:00:00.000Z","ordinal":`))
	os.WriteFile(other, data, 0o644)

	ix2, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ix2.Rollouts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		switch r.ID {
		case "rollout-3":
			t.Error("rollout-3 still indexed after its mirror file was removed")
		case "rollout-2", "rollout-4":
			if r.WatermarkOrdinal != 0 {
				t.Errorf("%s: watermark %d after start-up, want it reset", r.ID, r.WatermarkOrdinal)
			}
		}
		if p := datadir.MirrorPath(dir, r.ID); p != "" {
			if end := entriesOf(t, p); len(end) > 0 && r.WatermarkOffset > end[len(end)-1].End() {
				t.Errorf("%s: watermark offset %d beyond the mirror's %d", r.ID, r.WatermarkOffset, end[len(end)-1].End())
			}
		}
	}
	catchUp(t, ix2)
	ix2.Close()
	fresh := t.TempDir()
	os.Rename(datadir.RolloutsDir(dir), datadir.RolloutsDir(fresh))
	rebuild(t, fresh)
	sameRows(t, datadir.IndexPath(dir), datadir.IndexPath(fresh))
}
