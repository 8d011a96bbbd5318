package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// faultFS is an FS that fails chosen operations, once each, and records
// the size of each file at its last successful fsync.
type faultFS struct {
	mu     sync.Mutex
	count  map[string]int   // op -> calls so far
	faults map[string]error // "op#n" -> the error the nth call returns
	fired  []string         // faults returned
	synced map[string]int64 // path -> size at its last successful fsync
	seen   map[string]bool  // paths opened
	osfs   osFS
}

var _ FS = (*faultFS)(nil)

func newFaultFS() *faultFS {
	return &faultFS{count: map[string]int{}, faults: map[string]error{}, synced: map[string]int64{}, seen: map[string]bool{}}
}

// fail makes the nth call (from 1) of op ("write", "sync", "open",
// "truncate", "rename") return err.
func (fs *faultFS) fail(op string, n int, err error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults[fmt.Sprintf("%s#%d", op, n)] = err
}

func (fs *faultFS) next(op string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.count[op]++
	key := fmt.Sprintf("%s#%d", op, fs.count[op])
	err := fs.faults[key]
	if err != nil {
		delete(fs.faults, key)
		fs.fired = append(fs.fired, key)
	}
	return err
}

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := fs.next("open"); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f, err := fs.osfs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	fs.seen[name] = true
	fs.mu.Unlock()
	return &faultFile{File: f, fs: fs}, nil
}

func (fs *faultFS) Truncate(name string, size int64) error {
	if err := fs.next("truncate"); err != nil {
		return &os.PathError{Op: "truncate", Path: name, Err: err}
	}
	return fs.osfs.Truncate(name, size)
}

func (fs *faultFS) Rename(oldname, newname string) error {
	if err := fs.next("rename"); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return fs.osfs.Rename(oldname, newname)
}

func (fs *faultFS) Remove(name string) error { return fs.osfs.Remove(name) }

type faultFile struct {
	File
	fs *faultFS
}

// Write fails after writing half of p, as a disk filling up does.
func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.next("write"); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.Write(p)
}

// Sync fails leaving the data in the page cache, not on disk.
func (f *faultFile) Sync() error {
	if err := f.fs.next("sync"); err != nil {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: err}
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.synced[f.Name()] = st.Size()
	f.fs.mu.Unlock()
	return nil
}

// unsynced lists the files holding bytes past their last fsync.
func (fs *faultFS) unsynced() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []string
	for path := range fs.seen {
		st, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil || st.Size() != fs.synced[path] {
			out = append(out, fmt.Sprintf("%s: %d bytes, %d fsynced (%v)", path, sizeOf(st), fs.synced[path], err))
		}
	}
	return out
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

// TestFailedFsyncNeverAdvancesWatermark: write and fsync errors (EIO,
// ENOSPC) on the mirror files fail their batch; the retry cuts the files
// back and writes again, so that every watermark written vouches only for
// fsynced bytes, and after the faults the mirror holds every record once.
func TestFailedFsyncNeverAdvancesWatermark(t *testing.T) {
	e := newEnv(t)
	fs := newFaultFS()
	fs.fail("sync", 2, syscall.EIO)
	fs.fail("write", 4, syscall.ENOSPC)
	fs.fail("sync", 5, syscall.ENOSPC)
	fs.fail("write", 8, syscall.EIO)
	fs.fail("sync", 9, syscall.EIO)
	var mu sync.Mutex
	var violations []string
	r := e.start(Config{FS: fs, OnCommit: func(c Commit) {
		if bad := fs.unsynced(); len(bad) > 0 {
			mu.Lock()
			violations = append(violations, fmt.Sprintf("watermark %d written over %v", c.Seq, bad))
			mu.Unlock()
		}
	}}, false)
	ids := []string{"ro-a", "ro-b", "ro-c"}
	for round := 0; round < 6; round++ {
		for _, id := range ids {
			w := e.openWriter(id, nil)
			w.items(5, fmt.Sprint("round", round))
			w.close()
		}
	}
	e.caughtUp(r)
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	fs.mu.Lock()
	if len(fs.fired) != 5 {
		t.Errorf("faults fired: %v", fs.fired)
	}
	fs.mu.Unlock()
	for _, id := range ids {
		e.checkEqual(id)
	}
	if st := r.m.Status(); st.Quarantined != 0 || st.Records != uint64(len(ids)*(1+6*5)) {
		t.Fatalf("status %+v", st)
	}
}

// TestFailedBatchForgetsItsEpochs: a failed batch's packs were not
// accepted, so the epochs they carried do not judge its retry. Three
// writers (three lease epochs) publish before the mirror starts, so that
// one batch holds all of them; its fsync fails, and the retry must mirror
// the first writer's packs again, not refuse them as stale_epoch against
// the last writer's epoch.
func TestFailedBatchForgetsItsEpochs(t *testing.T) {
	e := newEnv(t)
	for round := 0; round < 3; round++ {
		w := e.openWriter("ro-e", nil)
		w.items(3, fmt.Sprint("round", round))
		w.close()
	}
	fs := newFaultFS()
	fs.fail("sync", 1, syscall.EIO)
	r := e.start(Config{FS: fs}, false)
	e.caughtUp(r)
	fs.mu.Lock()
	if len(fs.fired) != 1 {
		t.Errorf("faults fired: %v", fs.fired)
	}
	fs.mu.Unlock()
	if st := r.m.Status(); st.Quarantined != 0 || st.Records != 1+3*3 {
		t.Errorf("status %+v", st)
	}
	e.checkEqual("ro-e")
}

// TestFullDiskIsReported: a write failing with ENOSPC is the mirror's
// status error, naming the errno and the file, until a batch succeeds.
func TestFullDiskIsReported(t *testing.T) {
	e := newEnv(t)
	fs := newFaultFS()
	for n := 1; n <= 3; n++ {
		fs.fail("write", n, syscall.ENOSPC)
	}
	var mu sync.Mutex
	var seen string
	r := e.start(Config{FS: fs}, false)
	w := e.openWriter("ro-full", nil)
	w.items(3, "full")
	waitFor(t, 10*time.Second, "the full disk in the status", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if err := r.m.Status().Err; err != "" {
			seen = err
		}
		return seen != ""
	})
	if !strings.Contains(seen, "no space left on device") || !strings.Contains(seen, "ro-full.jsonl") {
		t.Fatalf("status error %q", seen)
	}
	e.caughtUp(r)
	e.checkEqual("ro-full")
	if err := r.m.Status().Err; err != "" {
		t.Fatalf("status error after the disk cleared: %q", err)
	}
}

// TestFailedTornRepairLeavesNothing: while the disk is full (ENOSPC on the
// write of the kept tail, EIO on its rename), a torn-tail repair creates
// no file; once it clears, one .broken holds the torn bytes.
func TestFailedTornRepairLeavesNothing(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	w := e.openWriter("ro-t", nil)
	w.items(10, "one")
	e.caughtUp(r)
	r.stop()
	path := filepath.Join(e.dir, datadir.Rollouts, "ro-t.jsonl")
	torn := []byte(`{"timestamp":"2026-11-29T10:00:00.123Z","ordinal":12,"type":"respo`)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fs := newFaultFS()
	fs.fail("write", 1, syscall.ENOSPC)
	fs.fail("write", 2, syscall.ENOSPC)
	fs.fail("rename", 1, syscall.EIO)
	r2 := e.start(Config{FS: fs}, false)
	w.items(5, "two")
	e.caughtUp(r2)
	e.checkEqual("ro-t")
	fs.mu.Lock()
	if len(fs.fired) != 3 {
		t.Errorf("faults fired: %v", fs.fired)
	}
	fs.mu.Unlock()
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "ro-t.jsonl" || names[1] != "ro-t.jsonl.broken" {
		t.Fatalf("rollouts/ holds %v, want the file and one .broken", names)
	}
	if got, err := os.ReadFile(path + ".broken"); err != nil || !bytes.Equal(got, torn) {
		t.Fatalf(".broken holds %q (%v), want the torn bytes", got, err)
	}
}
