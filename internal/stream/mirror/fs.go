package mirror

import (
	"os"
)

// FS is the mirror's seam to the file system for the files whose
// durability the watermark vouches for: the mirror files a batch appends
// to. The OS implementation is the default; tests put an error-injecting
// one in its place (as pebble's vfs/errorfs does).
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Truncate(name string, size int64) error
	Rename(oldname, newname string) error
	Remove(name string) error
}

// File is an open file of an FS.
type File interface {
	Write(p []byte) (int, error)
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
	Name() string
}

// osFS is the operating system's file system.
type osFS struct{}

var _ FS = (*osFS)(nil)

func (*osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return os.OpenFile(name, flag, perm)
}

func (*osFS) Truncate(name string, size int64) error { return os.Truncate(name, size) }

func (*osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (*osFS) Remove(name string) error { return os.Remove(name) }
