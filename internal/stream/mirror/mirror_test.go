package mirror

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// TestMirrorEqualsBus: records from several writers land in one file per
// rollout, byte-equal to the bus, and the index follows.
func TestMirrorEqualsBus(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, true)
	ids := []string{"ro-a", "ro-b", "ro-c"}
	for round := 0; round < 3; round++ {
		for _, id := range ids {
			w := e.openWriter(id, nil)
			w.items(20+round, fmt.Sprint("round", round))
			w.close()
		}
	}
	e.caughtUp(r)
	ctx := ctxT(t, 30*time.Second)
	for _, id := range ids {
		e.checkEqual(id)
		waitFor(t, 10*time.Second, "index of "+id, func() bool {
			ro, found, err := r.ix.Rollout(ctx, id)
			return err == nil && found && ro.WatermarkOrdinal == int64(1+20+21+22)
		})
	}
	st := r.m.Status()
	if st.Records != 3*(1+20+21+22) || st.Quarantined != 0 || st.Duplicates != 0 || st.Watermark != e.lastSeq() {
		t.Fatalf("status %+v", st)
	}
	rep, err := VerifyBus(ctx, e.bus, e.dir)
	if err != nil || len(rep.Problems) != 0 || uint64(rep.Records) != st.Records || len(rep.Behind) != 0 {
		t.Fatalf("VerifyBus: %+v, %v", rep, err)
	}
	t.Logf("status: %d records in %d messages, %d batches", st.Records, st.Messages, st.Batches)
}

// TestResumeFromWatermark: a mirror stopped and started again goes on from
// its watermark, receiving nothing twice.
func TestResumeFromWatermark(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	w := e.openWriter("ro-r", nil)
	w.items(30, "before")
	e.caughtUp(r)
	r.stop()
	wm := r.m.Watermark()
	sf, err := openState(e.dir)
	if err != nil || sf.cur.Seq != wm {
		t.Fatalf("mirror.state: %+v (%v), watermark %d", sf, err, wm)
	}
	sf.close()
	w.items(30, "while stopped")
	r2 := e.start(Config{}, false)
	e.caughtUp(r2)
	e.checkEqual("ro-r")
	if st := r2.m.Status(); st.Duplicates != 0 || st.Records != 30 {
		t.Fatalf("after restart: %+v; want the 30 new records and nothing again", st)
	}
}

// TestRedeliveryIsIdempotent: a crash between the fsync of the mirror
// files and the watermark means the messages come again; the records are
// compared byte for byte and skipped.
func TestRedeliveryIsIdempotent(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	w := e.openWriter("ro-d", nil)
	for i := 0; i < 5; i++ {
		w.items(7, fmt.Sprint("batch", i))
	}
	e.caughtUp(r)
	r.stop()
	before, _ := readFile(t, e.dir, "ro-d")
	setWatermark(t, e.dir, 0) // as if every batch had crashed before its watermark
	r2 := e.start(Config{}, false)
	e.caughtUp(r2)
	after, _ := readFile(t, e.dir, "ro-d")
	st := r2.m.Status()
	if after != before || st.Duplicates != 36 || st.Records != 0 || st.Quarantined != 0 {
		t.Fatalf("status %+v, file changed %v: want 36 duplicates skipped, nothing appended or refused", st, after != before)
	}
	e.checkEqual("ro-d")
}

// TestTornTailRepaired: a write cut short leaves part of a line; before the
// next append the mirror copies it to .broken and cuts it off.
func TestTornTailRepaired(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	w := e.openWriter("ro-t", nil)
	w.items(10, "one")
	e.caughtUp(r)
	r.stop()
	path := filepath.Join(e.dir, datadir.Rollouts, "ro-t.jsonl")
	torn := []byte(`{"timestamp":"2026-11-29T10:00:00.123Z","ordinal":12,"type":"respo`)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r2 := e.start(Config{}, true)
	w.items(5, "two")
	e.caughtUp(r2)
	e.checkEqual("ro-t")
	got, err := os.ReadFile(path + ".broken")
	if err != nil || !bytes.Equal(got, torn) {
		t.Fatalf(".broken holds %q (%v), want the torn bytes", got, err)
	}
	if st := r2.m.Status(); st.TornRepaired != 1 || st.Records != 5 {
		t.Fatalf("status %+v", st)
	}
	ctx := ctxT(t, 10*time.Second)
	waitFor(t, 10*time.Second, "the index", func() bool {
		ro, _, err := r2.ix.Rollout(ctx, "ro-t")
		return err == nil && ro.WatermarkOrdinal == 16
	})
}

// TestStartupKeepsOneRepresentation: a crash between a rename and the
// removal after it leaves a rollout both plain and compressed; Open keeps
// the one that holds the other whole, and removes temp files.
func TestStartupKeepsOneRepresentation(t *testing.T) {
	dir := t.TempDir()
	rdir := datadir.RolloutsDir(dir)
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		t.Fatal(err)
	}
	full := append(append(metaLine("x", "x", nil), '\n'), append(itemLine(2, "hello"), '\n')...)
	half := full[:bytes.IndexByte(full, '\n')+1]
	write := func(name string, data []byte, zst bool) {
		t.Helper()
		p := filepath.Join(rdir, name)
		if zst {
			var b bytes.Buffer
			if err := writeZstBytes(&b, data); err != nil {
				t.Fatal(err)
			}
			data = b.Bytes()
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("same.jsonl", full, false)
	write("same.jsonl.zst", full, true)
	write("zlonger.jsonl", half, false)
	write("zlonger.jsonl.zst", full, true)
	write("plonger.jsonl", full, false)
	write("plonger.jsonl.zst", half, true)
	write("bad.jsonl", full, false)
	write("bad.jsonl.zst", []byte("not zstd at all"), false)
	write(".tmp.same.jsonl.zst", []byte("partial"), false)
	if _, err := Open(ctxT(t, 10*time.Second), Config{Dir: dir, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"same.jsonl": true, "same.jsonl.zst": false,
		"zlonger.jsonl": false, "zlonger.jsonl.zst": true,
		"plonger.jsonl": true, "plonger.jsonl.zst": false,
		"bad.jsonl": true, "bad.jsonl.zst": false,
		".tmp.same.jsonl.zst": false,
	} {
		if got := exists(filepath.Join(rdir, name)); got != want {
			t.Errorf("%s exists: %v, want %v", name, got, want)
		}
	}
	if got, _ := readFile(t, dir, "zlonger"); got != string(full) {
		t.Errorf("zlonger holds %q", got)
	}
}
