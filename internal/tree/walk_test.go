package tree

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestLoadDirSkipsWhatIsNoFile: a FIFO, /dev/zero, a dangling symlink, a
// symlink loop and an unreadable sub-directory are skipped with a warning
// each; the real rollout beside them is read, and LoadDir returns.
func TestLoadDirSkipsWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	var b rollout.Builder
	good := b.Meta(rollout.SessionMeta{ID: "W", RolloutID: "rW", Source: rollout.Source{Kind: "sim"}, Cwd: "/"})
	if err := os.WriteFile(filepath.Join(dir, "rW.jsonl"), good.Encode(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"zero.jsonl": "/dev/zero", "dangling.jsonl": "nowhere", "loop.jsonl": "loop.jsonl"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	want := 4
	if os.Geteuid() != 0 { // root reads a 0000 directory anyway
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(locked, "x.jsonl"), good.Encode(), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(locked, 0o700) })
		want++
	}
	type result struct {
		c   *Corpus
		err error
	}
	done := make(chan result, 1)
	go func() { c, err := LoadDir(dir); done <- result{c, err} }()
	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("LoadDir hung on a file that is not a regular file")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.c.Rollouts) != 1 || r.c.Rollouts["rW"] == nil {
		t.Errorf("rollouts %v", r.c.Rollouts)
	}
	if len(r.c.Warnings) != want {
		t.Fatalf("warnings (want %d):\n%s", want, strings.Join(r.c.Warnings, "\n"))
	}
	for _, w := range r.c.Warnings {
		if !strings.HasPrefix(w, "skipping "+dir) || strings.Contains(w, "\n") {
			t.Errorf("warning %q", w)
		}
	}
}
