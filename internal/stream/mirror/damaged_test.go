package mirror

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestTruncatedZstSetAsideOthersFlow: one rollout's .jsonl.zst truncated
// while writers stream to several; that file is set aside and the rollout
// rebuilt from the bus, every other rollout keeps flowing, nothing is
// quarantined, and all equal the bus.
func TestTruncatedZstSetAsideOthersFlow(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{ColdAfter: 30 * time.Millisecond}, false)
	ids := []string{"ro-a", "ro-b", "ro-c", "ro-d"}
	ws := map[string]*writer{}
	for _, id := range ids {
		ws[id] = e.openWriter(id, nil)
		ws[id].items(5, "one")
	}
	e.caughtUp(r)
	zpath := e.plain("ro-b") + zstExt
	waitFor(t, 10*time.Second, "ro-b compressed", func() bool { return exists(zpath) })
	b, err := os.ReadFile(zpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zpath, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		for _, id := range ids {
			ws[id].items(5, fmt.Sprint("round", round))
		}
	}
	e.caughtUp(r)
	for _, id := range ids {
		e.checkEqual(id)
	}
	st := r.m.Status()
	if st.SetAside != 1 || len(st.Damaged) != 0 || st.Quarantined != 0 {
		t.Fatalf("status %+v", st)
	}
	kept, _ := filepath.Glob(filepath.Join(e.dir, datadir.Quarantine, datadir.Damaged, "ro-b.jsonl.zst.*.reason"))
	if len(kept) != 1 {
		t.Fatalf("reason files %v", kept)
	}
	why, _ := os.ReadFile(kept[0])
	t.Logf("set aside: %s", why)
}

// TestDirectoryAsMirrorFile: a directory where a mirror file should be is
// set aside at start-up and the rollout rebuilt from the bus.
func TestDirectoryAsMirrorFile(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	w := e.openWriter("ro-x", nil)
	w.items(5, "one")
	o := e.openWriter("ro-y", nil)
	o.items(5, "one")
	e.caughtUp(r)
	r.stop()
	path := e.plain("ro-x")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "junk"), 0o700); err != nil {
		t.Fatal(err)
	}
	r2 := e.start(Config{}, false)
	w.items(5, "two")
	o.items(5, "two")
	e.caughtUp(r2)
	e.checkEqual("ro-x")
	e.checkEqual("ro-y")
	if st := r2.m.Status(); st.SetAside != 1 || len(st.Damaged) != 0 || st.Quarantined != 0 {
		t.Fatalf("status %+v", st)
	}
}

// TestUnrebuildableNamed: a damaged file whose records the bus no longer
// holds stays named in Status.Damaged (health says degraded), and the
// other rollouts flow.
func TestUnrebuildableNamed(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	first := e.publish(packMsg("rollout.ro-p", 1, 1, metaLine("ro-p", "ro-p", nil), itemLine(2, "two")))
	e.publish(packMsg("rollout.ro-p", 3, 1, itemLine(3, "three")))
	o := e.openWriter("ro-q", nil)
	o.items(3, "one")
	e.caughtUp(r)
	r.stop()
	s, err := e.js.Stream(ctxT(t, 10*time.Second), stream.StreamRollouts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctxT(t, 10*time.Second), jetstream.WithPurgeSubject("rollout.ro-p"), jetstream.WithPurgeSequence(first+1)); err != nil {
		t.Fatal(err)
	}
	path := e.plain("ro-p")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	r2 := e.start(Config{}, false)
	o.items(3, "two")
	e.caughtUp(r2)
	e.checkEqual("ro-q")
	why := r2.m.Status().Damaged["ro-p"]
	if !strings.Contains(why, "not a regular file") || !strings.Contains(why, "no valid pack after ordinal 0") {
		t.Fatalf("Damaged[ro-p] = %q", why)
	}
	t.Log(why)
}
