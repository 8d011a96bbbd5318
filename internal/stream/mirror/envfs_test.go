package mirror

import (
	"strings"
	"testing"
	"time"
)

// TestDiskFaultEnv: LOGBOOK_DISKFAULT gives a mirror started without an FS
// a failing disk: the write fails once (the status says so, naming the
// file), the batch is retried, and the mirror ends equal to the bus.
func TestDiskFaultEnv(t *testing.T) {
	t.Setenv(DiskFaultEnv, "write:ENOSPC:1,sync:EIO:2")
	e := newEnv(t)
	r := e.start(Config{}, false)
	w := e.openWriter("ro-env", nil)
	w.items(3, "env")
	var seen string
	waitFor(t, 10*time.Second, "the injected fault in the status", func() bool {
		if err := r.m.Status().Err; err != "" {
			seen = err
		}
		return seen != ""
	})
	if !strings.Contains(seen, "no space left on device") || !strings.Contains(seen, "ro-env.jsonl") {
		t.Fatalf("status error %q", seen)
	}
	w.items(3, "more")
	e.caughtUp(r)
	e.checkEqual("ro-env")
	if err := r.m.Status().Err; err != "" {
		t.Fatalf("status error after the faults: %q", err)
	}
}

// TestDiskFaultEnvRefusesBadSpecs: a spec that cannot be read is an error
// naming the variable and the part.
func TestDiskFaultEnvRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{"write:ENOSPC", "read:EIO:1", "write:EPERM:1", "sync:EIO:0", "sync:EIO:x"} {
		t.Setenv(DiskFaultEnv, spec)
		if _, err := diskFaultFS(); err == nil || !strings.Contains(err.Error(), DiskFaultEnv) || !strings.Contains(err.Error(), spec) {
			t.Errorf("%q: %v", spec, err)
		}
	}
}

// TestDiskFaultEnvSparesOtherFiles: only the mirror files count: the
// mirror's epochs file (written at start-up) neither fails nor uses up a
// fault meant for a mirror file.
func TestDiskFaultEnvSparesOtherFiles(t *testing.T) {
	t.Setenv(DiskFaultEnv, "write:EIO:1")
	fs, err := diskFaultFS()
	if err != nil {
		t.Fatal(err)
	}
	ef := fs.(*envFaultFS)
	if err := ef.next("write", "/d/.mirror.epochs.tmp"); err != nil {
		t.Errorf("the epochs file: %v", err)
	}
	if err := ef.next("write", "/d/rollouts/r1.jsonl"); err == nil {
		t.Error("the first write of a mirror file did not fail")
	}
}
