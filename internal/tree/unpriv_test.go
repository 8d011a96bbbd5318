package tree

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// nobody is the unprivileged user root re-runs a check as.
const nobody = 65534

// TestLoadDirSkipsUnreadableDirAsUser: an unreadable sub-directory is
// skipped with one warning and the rest is read. Root reads a 0000
// directory anyway, so as root (CI, containers) the check runs again as an
// unprivileged user in a child process; if it cannot, it fails: a check
// that could not run is not a pass.
func TestLoadDirSkipsUnreadableDirAsUser(t *testing.T) {
	if dir := os.Getenv("LOGBOOK_UNPRIV_DIR"); dir != "" { // the child
		checkUnreadableSkipped(t, dir)
		return
	}
	dir := unreadableTree(t)
	if os.Geteuid() != 0 {
		checkUnreadableSkipped(t, dir)
		return
	}
	// Root: copy this test binary where nobody may run it, and run it as nobody.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(dir), "tree.test")
	copyFile(t, self, bin, 0o755)
	cmd := exec.Command(bin, "-test.run", "^TestLoadDirSkipsUnreadableDirAsUser$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LOGBOOK_UNPRIV_DIR="+dir, "HOME="+filepath.Dir(dir), "GOCOVERDIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestLoadDirSkipsUnreadableDirAsUser") {
		t.Fatalf("the check as uid %d failed or could not run: %v\n%s", nobody, err, out)
	}
}

// unreadableTree makes dir/rW.jsonl and dir/locked/x.jsonl with locked
// unreadable, owned by nobody when run as root, under a parent nobody can
// enter.
func unreadableTree(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "logbook-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(parent, "d", "locked"), 0o700); os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "d")
	locked := filepath.Join(dir, "locked")
	if err := os.MkdirAll(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	var b rollout.Builder
	meta := b.Meta(rollout.SessionMeta{ID: "W", RolloutID: "rW", Source: rollout.Source{Kind: "sim"}, Cwd: "/"})
	good := meta.Encode()
	for _, p := range []string{filepath.Join(dir, "rW.jsonl"), filepath.Join(locked, "x.jsonl")} {
		if err := os.WriteFile(p, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{dir, locked, filepath.Join(dir, "rW.jsonl"), filepath.Join(locked, "x.jsonl")} {
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

func checkUnreadableSkipped(t *testing.T, dir string) {
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if len(c.Rollouts) != 1 || c.Rollouts["rW"] == nil {
		t.Errorf("rollouts %v", c.Rollouts)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "locked") || strings.Contains(c.Warnings[0], "\n") {
		t.Fatalf("want one warning for the unreadable directory, got:\n%s", strings.Join(c.Warnings, "\n"))
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
