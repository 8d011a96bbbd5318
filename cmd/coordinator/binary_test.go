package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinary builds the real coordinator and runs it as a user would: exit
// codes and stderr are those of the process, not of the in-process tree.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	bin := filepath.Join(t.TempDir(), "coordinator")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			code = ee.ExitCode()
		default:
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}

	out, stderr, code := run("replay", example("mid-turn-compaction"))
	if code != exitOK || stderr != "" || !strings.Contains(out, "call-deploy-1") {
		t.Errorf("good file: exit %d, stderr %q, stdout:\n%s", code, stderr, out)
	}

	bad := damaged(t, example("chapter-rollback-1"), corruptLine(12))
	out, stderr, code = run("replay", bad)
	if code != exitFailure || out != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.HasPrefix(stderr, "coordinator: ") || !strings.Contains(stderr, bad+" line 1") || !strings.Contains(stderr, "--salvage") {
		t.Errorf("damaged file: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	_, stderr, code = run("replay", "--no-such-flag", example("mid-turn-compaction"))
	if code != exitUsage || !strings.Contains(stderr, "unknown flag: --no-such-flag") {
		t.Errorf("bad flag: exit %d, stderr %q", code, stderr)
	}
}
