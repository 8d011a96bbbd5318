package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// ErrLocked: another coordinator holds the data dir.
var ErrLocked = errors.New("serve: data dir in use")

// lockInfo is what the holder writes into LOCK.
type lockInfo struct {
	PID     int    `json:"pid"`
	Host    string `json:"host"`
	Started string `json:"started"`
}

// Lock is an exclusive flock on <data>/LOCK, held while the process lives:
// the kernel drops it when the process dies, however it dies.
type Lock struct {
	f *os.File
}

// TakeLock locks dir for this process, or fails with ErrLocked naming the
// holder.
func TakeLock(dir string) (*Lock, error) {
	path := filepath.Join(dir, datadir.Lock)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if err := flock(f); err != nil {
		defer f.Close()
		if !errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("serve: lock %s: %w", path, err)
		}
		b, _ := os.ReadFile(path)
		var h lockInfo
		if json.Unmarshal(b, &h) != nil || h.PID == 0 {
			return nil, fmt.Errorf("%w: %s is held by another process (%s)", ErrLocked, path, strings.TrimSpace(string(b)))
		}
		return nil, fmt.Errorf("%w: %s is held by coordinator pid %d on %s since %s", ErrLocked, path, h.PID, h.Host, h.Started)
	}
	host, _ := os.Hostname()
	info, _ := json.Marshal(lockInfo{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Format(time.RFC3339)})
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(append(info, '\n'), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		funlock(f)
		f.Close()
		return nil, fmt.Errorf("serve: write %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock. The file stays: removing it would race with the
// next taker.
func (l *Lock) Release() error {
	funlock(l.f)
	return l.f.Close()
}
