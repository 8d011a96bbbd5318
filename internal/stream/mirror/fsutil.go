package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// syncDir fsyncs a directory, making the names created, renamed or removed
// in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// writeFileSync writes path (truncating it) and fsyncs it; the caller
// fsyncs the directory.
func writeFileSync(fsys FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeAtomic replaces path by temp file, fsync, rename and directory fsync:
// after a crash it holds the old content or the new, never a mix.
//
// On an error nothing is left behind: no temp file, no empty or partial
// file at path.
func writeAtomic(fsys FS, path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := writeFileSync(fsys, tmp, data); err != nil {
		fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		fsys.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncer is a file to fsync and close.
type syncer interface {
	Sync() error
	Close() error
}

// syncFiles fsyncs files, all at once (the file system commits concurrent
// fsyncs together), and closes them. It returns the first error.
func syncFiles(files []syncer) error {
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = errors.Join(f.Sync(), f.Close())
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sameBytes reports whether two readers yield the same bytes.
func sameBytes(a, b io.Reader) (bool, error) {
	bufA := make([]byte, 256<<10)
	bufB := make([]byte, 256<<10)
	for {
		n, errA := io.ReadFull(a, bufA)
		m, errB := io.ReadFull(b, bufB[:n])
		if errA != nil && !errors.Is(errA, io.EOF) && !errors.Is(errA, io.ErrUnexpectedEOF) {
			return false, errA
		}
		if errB != nil && !errors.Is(errB, io.EOF) && !errors.Is(errB, io.ErrUnexpectedEOF) {
			return false, errB
		}
		if m != n || !bytes.Equal(bufA[:n], bufB[:m]) {
			return false, nil
		}
		if n < len(bufA) {
			// a is done; b must be too.
			var one [1]byte
			k, err := b.Read(one[:])
			for k == 0 && err == nil {
				k, err = b.Read(one[:])
			}
			if k > 0 {
				return false, nil
			}
			if !errors.Is(err, io.EOF) {
				return false, err
			}
			return true, nil
		}
	}
}
