package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
