// Package unprivtest runs a test's check as an unprivileged user, for the
// checks root would pass without looking: root reads a 0000 directory, so
// a test of "an unreadable directory is skipped with a warning" proves
// nothing when the tests run as root (CI, containers). Run re-executes
// the test binary, only that test, as uid and gid 65534 (nobody) through
// syscall.Credential; when it cannot (no privilege to drop, the child
// does not start or does not pass), the test fails: a check that could
// not run is not a pass. Not run as root, the check runs in the test's
// own process.
//
// The child runs the whole test function again: what comes before Run in
// it runs twice. A test using it:
//
//	func TestX(t *testing.T) {
//		unprivtest.Run(t, func(t *testing.T, parent string) string {
//			// make the tree under parent (Chown what the user must own)
//			return dir
//		}, func(t *testing.T, dir string) {
//			// the check, as the user
//		})
//	}
package unprivtest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// ID is the uid and gid the check runs as under root.
const ID = 65534

// envDir carries the prepared directory to the child.
const envDir = "LOGBOOK_UNPRIV_DIR"

// Run prepares a directory with setup (given a fresh parent directory the
// user can enter, owned by the user under root) and runs check on it as
// an unprivileged user. In the re-executed child, setup is not run: the
// child checks the parent's directory.
func Run(t *testing.T, setup func(t *testing.T, parent string) string, check func(t *testing.T, dir string)) {
	t.Helper()
	if dir := os.Getenv(envDir); dir != "" {
		check(t, dir)
		return
	}
	parent, err := os.MkdirTemp("", "logbook-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unlock(parent); os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(parent, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	Chown(t, work)
	dir := setup(t, work)
	if os.Geteuid() != 0 {
		check(t, dir)
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary sits in a directory only root may enter: a copy the
	// user can run, and a TMPDIR and HOME the user owns.
	bin := filepath.Join(parent, filepath.Base(self))
	copyFile(t, self, bin)
	tmp := filepath.Join(parent, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	Chown(t, tmp)
	cmd := exec.Command(bin, "-test.run", runPattern(t.Name()), "-test.count=1", "-test.v")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), envDir+"="+dir, "TMPDIR="+tmp, "HOME="+tmp, "GOCOVERDIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ID, Gid: ID}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("the check as uid %d failed or could not run: %v\n%s", ID, err, out)
	}
	t.Logf("checked as uid %d", ID)
}

// Chown gives paths to the user the check runs as, when running as root
// (the user owns them then as the test's own files otherwise).
func Chown(t *testing.T, paths ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	for _, p := range paths {
		if err := os.Lchown(p, ID, ID); err != nil {
			t.Fatal(err)
		}
	}
}

// runPattern matches exactly the test (and subtest) named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// unlock makes every directory under parent removable again.
func unlock(parent string) {
	// A directory is visited before it is read: made readable first.
	filepath.WalkDir(parent, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
