package mirror

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// DiskFaultEnv names the environment variable that gives a mirror a failing
// disk from outside the process (`agent-sim crash` arms a serving
// coordinator with it; nothing else should set it):
//
//	LOGBOOK_DISKFAULT=op:ERRNO:n[,op:ERRNO:n...]
//
// makes the nth call (from 1) of op on the mirror files (rollouts/*.jsonl;
// not the mirror's epochs or state files) fail with ERRNO,
// once: op is write (half of the bytes are written first, as a filling disk
// does) or sync (the data stays in the page cache); ERRNO is ENOSPC or EIO.
// Each injected fault writes one line to stderr,
//
//	faults: disk fault write#3 injected on FILE: no space left on device
//
// so a test can tell it was reached.
const DiskFaultEnv = "LOGBOOK_DISKFAULT"

// diskFaultFS reads DiskFaultEnv: nil when it is unset.
func diskFaultFS() (FS, error) {
	spec := os.Getenv(DiskFaultEnv)
	if spec == "" {
		return nil, nil
	}
	fs := &envFaultFS{faults: map[string]syscall.Errno{}, count: map[string]int{}}
	for _, part := range strings.Split(spec, ",") {
		f := strings.Split(strings.TrimSpace(part), ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("mirror: %s: %q: want op:ERRNO:n", DiskFaultEnv, part)
		}
		if f[0] != "write" && f[0] != "sync" {
			return nil, fmt.Errorf("mirror: %s: %q: op %q (want write or sync)", DiskFaultEnv, part, f[0])
		}
		errno, ok := map[string]syscall.Errno{"ENOSPC": syscall.ENOSPC, "EIO": syscall.EIO}[f[1]]
		if !ok {
			return nil, fmt.Errorf("mirror: %s: %q: errno %q (want ENOSPC or EIO)", DiskFaultEnv, part, f[1])
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("mirror: %s: %q: n %q (want 1 or more)", DiskFaultEnv, part, f[2])
		}
		fs.faults[f[0]+"#"+f[2]] = errno
	}
	return fs, nil
}

// envFaultFS is the OS file system with DiskFaultEnv's faults.
type envFaultFS struct {
	osFS
	mu     sync.Mutex
	count  map[string]int
	faults map[string]syscall.Errno
}

func (fs *envFaultFS) next(op, name string) error {
	if filepath.Base(filepath.Dir(name)) != datadir.Rollouts || !strings.HasSuffix(name, datadir.JSONLExt) {
		return nil // not a mirror file (the epochs and state files, kept-aside reasons)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.count[op]++
	key := op + "#" + strconv.Itoa(fs.count[op])
	errno, ok := fs.faults[key]
	if !ok {
		return nil
	}
	delete(fs.faults, key)
	fmt.Fprintf(os.Stderr, "faults: disk fault %s injected on %s: %v\n", key, name, errno)
	return errno
}

func (fs *envFaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &envFaultFile{File: f, fs: fs}, nil
}

type envFaultFile struct {
	File
	fs *envFaultFS
}

func (f *envFaultFile) Write(p []byte) (int, error) {
	if err := f.fs.next("write", f.Name()); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.Write(p)
}

func (f *envFaultFile) Sync() error {
	if err := f.fs.next("sync", f.Name()); err != nil {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: err}
	}
	return f.File.Sync()
}
