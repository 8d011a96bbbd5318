package mirror

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// TestPrivateModes: in a data dir pre-created 0755, rollouts/ and
// quarantine/ are 0700 and every file the mirror and the index create is
// 0600.
func TestPrivateModes(t *testing.T) {
	e := newEnv(t)
	if err := os.Chmod(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := e.start(Config{}, true)
	w := e.openWriter("ro-m", nil)
	w.items(3, "one")
	e.publish(packMsg("rollout.ro-junk", 1, 1, []byte("not json")))
	e.caughtUp(r)
	r.stop()
	n := 0
	err := filepath.WalkDir(e.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == e.dir {
			return err
		}
		st, err := os.Lstat(path)
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"rollouts/ro-m.jsonl", "quarantine", "index.db", datadir.MirrorState} {
		if !exists(filepath.Join(e.dir, p)) {
			t.Errorf("%s not created", p)
		}
	}
	t.Logf("%d entries checked", n)
}
