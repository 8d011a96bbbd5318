package mirror

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
)

func (e *env) plain(id string) string { return filepath.Join(e.dir, datadir.Rollouts, id+".jsonl") }

// TestCompressionRoundTrip: an idle rollout is compressed after a verified
// write, still reads the same (and the index reads it), and an append
// re-materializes it.
func TestCompressionRoundTrip(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{ColdAfter: 30 * time.Millisecond}, true)
	w := e.openWriter("cold", nil)
	w.items(200, "history")
	w.close()
	e.caughtUp(r)
	waitFor(t, 10*time.Second, "compression", func() bool { return exists(e.plain("cold")+".zst") && !exists(e.plain("cold")) })
	got, zst := readFile(t, e.dir, "cold")
	if !zst {
		t.Fatal("not compressed")
	}
	if want := e.busLines("cold"); got != want {
		t.Fatal("compressed file does not hold the bus's records")
	}
	f, err := rollout.OpenFile(e.plain("cold") + ".zst")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rollout.Verify(f, rollout.VerifyOptions{RequireCRC: true})
	if err != nil || !rep.OK() || rep.Records != 201 {
		t.Fatalf("verify compressed: %+v, %v", rep, err)
	}
	st, _ := os.Stat(e.plain("cold") + ".zst")
	t.Logf("201 records: %d bytes plain, %d compressed", len(got), st.Size())

	// An append: JSONL again, then the new records.
	w2 := e.openWriter("cold", nil)
	w2.items(5, "warm again")
	e.caughtUp(r)
	if !exists(e.plain("cold")) {
		t.Fatal("append did not re-materialize the rollout")
	}
	e.checkEqual("cold")
	if s := r.m.Status(); s.Compressed < 1 || s.Rematerialized != 1 {
		t.Fatalf("status %+v", s)
	}
	ctx := ctxT(t, 10*time.Second)
	waitFor(t, 10*time.Second, "the index", func() bool {
		ro, _, err := r.ix.Rollout(ctx, "cold")
		return err == nil && ro.WatermarkOrdinal == 206
	})
	// Idle again: compressed again.
	w2.close()
	waitFor(t, 10*time.Second, "compression again", func() bool { return exists(e.plain("cold")+".zst") && !exists(e.plain("cold")) })
	e.checkEqual("cold")
}

// TestReferencedStayPlain: a rollout named by another's history_base is
// never compressed, and one compressed before it is named is
// re-materialized when the reference arrives.
func TestReferencedStayPlain(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{ColdAfter: 30 * time.Millisecond}, false)
	base := e.openWriter("base", nil)
	base.items(10, "base")
	base.close()
	e.caughtUp(r)
	waitFor(t, 10*time.Second, "base compressed", func() bool { return !exists(e.plain("base")) })

	// A reference fork of base: base must come back as JSONL and stay so.
	e.openWriter("fork", &rollout.SessionMeta{ID: "fork", RolloutID: "fork", Source: rollout.Source{Kind: "sim"}, Cwd: "/w",
		HistoryMode: rollout.HistoryPaginated, SchemaVersion: rollout.Version,
		HistoryBase: &rollout.HistoryPosition{RolloutID: "base", EndOrdinalExclusive: 5}}).items(3, "fork")
	e.caughtUp(r)
	waitFor(t, 10*time.Second, "base re-materialized", func() bool { return exists(e.plain("base")) && !exists(e.plain("base")+".zst") })
	other := e.openWriter("other", nil)
	other.items(3, "other")
	other.close()
	waitFor(t, 10*time.Second, "other and fork compressed", func() bool {
		return !exists(e.plain("other")) && !exists(e.plain("fork"))
	})
	if !exists(e.plain("base")) {
		t.Fatal("the referenced rollout was compressed")
	}

	// After a restart the reference is learnt from the files.
	r.stop()
	before := r.m.Status().Compressed
	r2 := e.start(Config{ColdAfter: 30 * time.Millisecond}, false)
	idle := e.openWriter("idle", nil)
	idle.items(2, "idle")
	idle.close()
	waitFor(t, 10*time.Second, "idle compressed", func() bool { return !exists(e.plain("idle")) })
	if !exists(e.plain("base")) {
		t.Fatal("after a restart, the referenced rollout was compressed")
	}
	e.checkEqual("base")
	t.Logf("compressed %d before the restart, %d after", before, r2.m.Status().Compressed)
}
