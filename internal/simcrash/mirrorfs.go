package simcrash

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

// Coordinator-side crash points: the mirror, in its own scenario env (its
// own bus, so the mirror's nth append is the same message in every run).
const (
	// PointMirrorAfterAck: a message is received from JetStream (its
	// writer was told it is stored); the mirror dies before writing it.
	PointMirrorAfterAck = "mirror_after_ack"
	// PointMirrorTornWrite: the mirror dies half way through appending a
	// message's lines (a torn tail for the restart to cut off).
	PointMirrorTornWrite = "mirror_torn_write"
)

func mirrorPoint(p string) bool { return p == PointMirrorAfterAck || p == PointMirrorTornWrite }

// crashFS is the mirror's file system with a death in it: the at-th
// append to a mirror file is where the coordinator dies (before it, or
// half way through it when torn). From then on nothing reaches the disk:
// every operation fails with EIO and changes nothing, as nothing happens
// after a SIGKILL; what was written before stays (the page cache survives
// a process). died is called once, at the death (it must not wait for the
// mirror).
type crashFS struct {
	mu      sync.Mutex
	appends int
	at      int
	torn    bool
	dead    bool
	died    func()
}

var _ mirror.FS = (*crashFS)(nil)

func (fs *crashFS) gone() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.dead
}

// Appends counts the appends to mirror files so far.
func (fs *crashFS) Appends() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.appends
}

func eio(op, name string) error { return &os.PathError{Op: op, Path: name, Err: syscall.EIO} }

func (fs *crashFS) OpenFile(name string, flag int, perm os.FileMode) (mirror.File, error) {
	if fs.gone() {
		return nil, eio("open", name)
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	mf := strings.HasSuffix(name, ".jsonl") && filepath.Base(filepath.Dir(name)) == "rollouts"
	return &crashFile{File: f, fs: fs, mirrorFile: mf}, nil
}

func (fs *crashFS) Truncate(name string, size int64) error {
	if fs.gone() {
		return eio("truncate", name)
	}
	return os.Truncate(name, size)
}

func (fs *crashFS) Rename(oldname, newname string) error {
	if fs.gone() {
		return eio("rename", oldname)
	}
	return os.Rename(oldname, newname)
}

func (fs *crashFS) Remove(name string) error {
	if fs.gone() {
		return eio("remove", name)
	}
	return os.Remove(name)
}

type crashFile struct {
	*os.File
	fs         *crashFS
	mirrorFile bool
}

func (f *crashFile) Write(p []byte) (int, error) {
	fs := f.fs
	fs.mu.Lock()
	if fs.dead {
		fs.mu.Unlock()
		return 0, eio("write", f.Name())
	}
	if f.mirrorFile {
		fs.appends++
		if fs.appends == fs.at {
			fs.dead = true
			n := 0
			if fs.torn && len(p) > 1 {
				n, _ = f.File.Write(p[:len(p)/2])
			}
			fs.mu.Unlock()
			if fs.died != nil {
				fs.died()
			}
			return n, eio("write", f.Name())
		}
	}
	fs.mu.Unlock()
	return f.File.Write(p)
}

func (f *crashFile) Sync() error {
	if f.fs.gone() {
		return eio("fsync", f.Name())
	}
	return f.File.Sync()
}
