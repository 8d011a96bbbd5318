package index

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// TestCatchUpRolloutsGroups: the mirror's catch-up of several rollouts in
// one transaction tells each rollout's outcome, in order, once committed:
// a missing mirror file or a damaged one is that rollout's error, the
// others are indexed, and the result equals catching them up one by one.
func TestCatchUpRolloutsGroups(t *testing.T) {
	dir := t.TempDir()
	genRollouts(t, dir, 1, 3, 40, false)
	// Another rollout's records under this id: that rollout's problem.
	writeMirrorFile(t, dir, "rollout-bad", mustRead(t, filepath.Join(dir, datadir.Rollouts, "rollout-1"+datadir.JSONLExt)))
	one := t.TempDir()
	if err := os.CopyFS(one, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	ix := openDir(t, dir)
	ids := []string{"rollout-1", "rollout-gone", "rollout-2", "rollout-bad", "rollout-3"}
	var got []string
	errs := map[string]error{}
	ns := map[string]int{}
	if err := ix.CatchUpRollouts(context.Background(), ids, func(id string, n int, err error) {
		got = append(got, id)
		ns[id], errs[id] = n, err
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("done called for %v, want %v", got, ids)
	}
	for i := range ids {
		if got[i] != ids[i] {
			t.Fatalf("done called for %v, want %v (in order)", got, ids)
		}
	}
	if !errors.Is(errs["rollout-gone"], fs.ErrNotExist) {
		t.Errorf("a rollout without a mirror file: %v", errs["rollout-gone"])
	}
	if errs["rollout-bad"] == nil {
		t.Error("a mirror file holding another rollout's records was indexed")
	}
	for _, id := range []string{"rollout-1", "rollout-2", "rollout-3"} {
		if errs[id] != nil || ns[id] == 0 {
			t.Errorf("%s: %d records, %v", id, ns[id], errs[id])
		}
	}
	ix1 := openDir(t, one)
	for _, id := range ids {
		ix1.CatchUpRollout(context.Background(), id)
	}
	for _, q := range []string{"SELECT count(*) FROM items", "SELECT count(*) FROM turns", "SELECT count(*) FROM messages", "SELECT count(*) FROM rollouts"} {
		if a, b := count(t, ix.db, q), count(t, ix1.db, q); a != b {
			t.Errorf("%s: %d grouped, %d one by one", q, a, b)
		}
	}
}
