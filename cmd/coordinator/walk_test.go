package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/logbook-agents/logbook/internal/stream/streamtest"
	"github.com/logbook-agents/logbook/internal/unprivtest"
)

// A FIFO named *.jsonl under --rollouts is skipped with a warning on
// stderr; tree and unconfirmed return (they used to block for ever).
func TestRolloutsSkipsFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.jsonl")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"tree", "unconfirmed"} {
		r := runCLI(t, c, "--rollouts", dir)
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stderr, "warning: skipping "+fifo+": not a regular file") || !strings.Contains(r.stderr, "zero.jsonl: not a regular file") {
			t.Errorf("%s: stderr %q", c, r.stderr)
		}
	}
}

// TestRolloutsSkipsUnreadableDir: an unreadable sub-directory under
// --rollouts (or import's directory) is skipped with one line naming it,
// and the rest is read: tree and unconfirmed exit 0, import imports the
// rest and counts the directory as failed. Root reads a 0000 directory
// anyway: as root the commands run as an unprivileged user
// (internal/unprivtest), and the test fails if they cannot.
func TestRolloutsSkipsUnreadableDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bus")
	}
	const good = "mid-turn-compaction.jsonl"
	unprivtest.Run(t, func(t *testing.T, dir string) string {
		data, err := os.ReadFile(example(strings.TrimSuffix(good, ".jsonl")))
		if err != nil {
			t.Fatal(err)
		}
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(dir, good), filepath.Join(locked, good)} {
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			unprivtest.Chown(t, p)
		}
		unprivtest.Chown(t, locked)
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		return dir
	}, func(t *testing.T, dir string) {
		warning := "skipping " + filepath.Join(dir, "locked") + ": permission denied"
		for _, c := range []string{"tree", "unconfirmed"} {
			r := runCLI(t, c, "--rollouts", dir)
			r.wantCode(t, exitOK)
			if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, warning) {
				t.Errorf("%s: stderr %q, want one line %q", c, r.stderr, warning)
			}
			if c == "tree" && !strings.HasPrefix(r.stdout, "thread-M ") {
				t.Errorf("tree: stdout %q, want the readable rollout's thread-M", r.stdout)
			}
		}
		tb := streamtest.New(t, streamtest.Options{})
		r := runCLI(t, "import", "--nats", tb.Server.ClientURL(), "--data", t.TempDir(), dir)
		r.wantCode(t, exitFailure)
		if !strings.Contains(r.stdout, "ok      "+filepath.Join(dir, good)) ||
			!strings.Contains(r.stdout, "failed  "+filepath.Join(dir, "locked")+": skipped: permission denied") ||
			!strings.Contains(r.stdout, "2 files: ") {
			t.Errorf("import: stdout %q", r.stdout)
		}
	})
}
