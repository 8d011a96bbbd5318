package tree

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/unprivtest"
)

// TestLoadDirSkipsWhatIsNoFile: a FIFO, /dev/zero, a dangling symlink, a
// symlink loop and an unreadable sub-directory are skipped with a warning
// each; the real rollout beside them is read, and LoadDir returns. Root
// reads a 0000 directory anyway: as root the check runs as an
// unprivileged user (internal/unprivtest), and fails if it cannot.
func TestLoadDirSkipsWhatIsNoFile(t *testing.T) {
	unprivtest.Run(t, func(t *testing.T, dir string) string {
		var b rollout.Builder
		good := b.Meta(rollout.SessionMeta{ID: "W", RolloutID: "rW", Source: rollout.Source{Kind: "sim"}, Cwd: "/"})
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(dir, "rW.jsonl"), filepath.Join(locked, "x.jsonl")} {
			if err := os.WriteFile(p, good.Encode(), 0o600); err != nil {
				t.Fatal(err)
			}
			unprivtest.Chown(t, p)
		}
		if err := syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{"zero.jsonl": "/dev/zero", "dangling.jsonl": "nowhere", "loop.jsonl": "loop.jsonl"} {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		unprivtest.Chown(t, locked)
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		return dir
	}, func(t *testing.T, dir string) {
		checkSkipped(t, dir)
	})
}

func checkSkipped(t *testing.T, dir string) {
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
	const want = 5 // fifo, zero, dangling, loop, locked/
	if len(r.c.Warnings) != want {
		t.Fatalf("warnings (want %d):\n%s", want, strings.Join(r.c.Warnings, "\n"))
	}
	locked := false
	for _, w := range r.c.Warnings {
		if !strings.HasPrefix(w, "skipping "+dir) || strings.Contains(w, "\n") {
			t.Errorf("warning %q", w)
		}
		locked = locked || strings.HasPrefix(w, "skipping "+filepath.Join(dir, "locked")+": permission denied")
	}
	if !locked {
		t.Errorf("no warning says the locked directory cannot be read:\n%s", strings.Join(r.c.Warnings, "\n"))
	}
}
