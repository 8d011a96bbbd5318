//go:build linux

package mirror

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2): the data and what is needed to read it back,
// without the inode's times.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
