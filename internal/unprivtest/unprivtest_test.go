package unprivtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunChecksAsUser: the check runs as uid ID when the tests run as root
// (as the test's own user otherwise), on the directory setup made.
func TestRunChecksAsUser(t *testing.T) {
	want := os.Geteuid()
	if want == 0 {
		want = ID
	}
	Run(t, func(t *testing.T, parent string) string {
		p := filepath.Join(parent, "f")
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		Chown(t, p)
		return parent
	}, func(t *testing.T, dir string) {
		if os.Getenv(envDir) != "" {
			want = ID // the child
		}
		if got := os.Geteuid(); got != want {
			t.Fatalf("check runs as uid %d, want %d", got, want)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "x" {
			t.Fatalf("setup's file: %q, %v", b, err)
		}
	})
}

// TestRunFailsWhenTheCheckFails: a check failing as the user fails the
// test that ran it (run in a process of its own, so that this test can see
// it fail).
func TestRunFailsWhenTheCheckFails(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run", "^TestFailingCheck$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LOGBOOK_UNPRIV_SELFTEST=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--- FAIL: TestFailingCheck") || !strings.Contains(string(out), "deliberately") {
		t.Fatalf("a failing check: %v\n%s", err, out)
	}
}

// TestFailingCheck fails on purpose, only under TestRunFailsWhenTheCheckFails.
func TestFailingCheck(t *testing.T) {
	if os.Getenv("LOGBOOK_UNPRIV_SELFTEST") == "" {
		return
	}
	Run(t, func(t *testing.T, parent string) string { return parent }, func(t *testing.T, dir string) {
		t.Fatal("deliberately")
	})
}

func TestRunPattern(t *testing.T) {
	if got := runPattern("TestA/sub.x"); got != `^TestA$/^sub\.x$` {
		t.Fatalf("runPattern = %q", got)
	}
}
