package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfileEnv: LOGBOOK_CPUPROFILE makes the process write a CPU
// profile (pprof's gzip-compressed protobuf) to the file it names, and a
// file that cannot be created is a warning, not a failure.
func TestCPUProfileEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	t.Setenv(cpuProfileEnv, path)
	var warn strings.Builder
	stop := startCPUProfile(&warn)
	for i := 0; i < 1e6; i++ {
		_ = i * i
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b || warn.String() != "" {
		t.Fatalf("profile %d bytes, err %v, warning %q; want a gzip stream and no warning", len(b), err, warn.String())
	}
	t.Setenv(cpuProfileEnv, filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof"))
	warn.Reset()
	startCPUProfile(&warn)()
	if warn.String() == "" {
		t.Error("an uncreatable profile file said nothing")
	}
}
