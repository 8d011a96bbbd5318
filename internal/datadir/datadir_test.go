package datadir

import (
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorFilesOnePerRollout: one file per valid rollout id, the plain
// one when both exist, sorted; temporary files, invalid ids, directories
// and FIFOs are not mirror files.
func TestMirrorFilesOnePerRollout(t *testing.T) {
	dir := t.TempDir()
	rd := RolloutsDir(dir)
	if err := os.MkdirAll(filepath.Join(rd, "sub.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b.jsonl.zst", "b.jsonl", "a.jsonl.zst", "c.jsonl", ".tmp.x.jsonl", "bad id.jsonl", "notes.txt"} {
		touch(t, filepath.Join(rd, n))
	}
	if err := syscall.Mkfifo(filepath.Join(rd, "d.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := MirrorFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range got {
		names = append(names, f.RolloutID+"="+filepath.Base(f.Path))
	}
	want := []string{"a=a.jsonl.zst", "b=b.jsonl", "c=c.jsonl"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("MirrorFiles = %v, want %v", names, want)
	}
	if p := MirrorPath(dir, "b"); p != filepath.Join(rd, "b.jsonl") {
		t.Fatalf("MirrorPath(b) = %q, want the plain file", p)
	}
	if p := MirrorPath(dir, "a"); p != filepath.Join(rd, "a.jsonl.zst") {
		t.Fatalf("MirrorPath(a) = %q, want the compressed file", p)
	}
	if p := MirrorPath(dir, "d"); p != "" {
		t.Fatalf("MirrorPath(d) = %q for a FIFO, want none", p)
	}
}

// TestNoDataDir: a data dir without rollouts/ has no mirror files, and
// that is not an error.
func TestNoDataDir(t *testing.T) {
	got, err := MirrorFiles(filepath.Join(t.TempDir(), "missing"))
	if err != nil || len(got) != 0 {
		t.Fatalf("MirrorFiles of a missing dir = %v, %v", got, err)
	}
}
