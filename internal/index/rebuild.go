package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// ErrInUse is returned by Rebuild when the old index.db is open by another
// process that keeps its WAL from being checkpointed (a coordinator serving
// the data dir): swapping the file under it could pair its WAL with the new
// file.
var ErrInUse = errors.New("index: index.db is in use")

// Rebuild builds a new index of data dir dir from its mirror files into
// index.db.reindex, then swaps it in for index.db with one rename: a crash at
// any point leaves the old index (or none) in place, whole. The caller makes
// sure nothing else writes index.db meanwhile (it holds the data dir LOCK);
// readers may keep reading the old file. progress may be nil.
func Rebuild(ctx context.Context, dir string, opt Options, progress Progress) (CatchUpReport, error) {
	final := datadir.IndexPath(dir)
	tmp := final + ".reindex"
	if err := removeDB(tmp); err != nil {
		return CatchUpReport{}, err
	}
	ix, err := OpenFile(ctx, tmp, opt)
	if err != nil {
		return CatchUpReport{}, err
	}
	ix.dir, ix.mirror, ix.deferJudge = dir, dir, true
	rep, err := ix.CatchUp(ctx, progress)
	if err == nil {
		err = ix.judgeAll(ctx)
	}
	if cerr := ix.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncFile(tmp)
	}
	if err == nil {
		err = emptyWAL(ctx, final)
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		removeDB(tmp)
		return rep, err
	}
	return rep, syncFile(dir)
}

// removeDB removes an SQLite file and its WAL and shared-memory files.
func removeDB(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// emptyWAL checkpoints the old index's WAL into it and truncates it, so no
// frame of the old database is left for the new file to be paired with.
func emptyWAL(ctx context.Context, path string) error {
	if _, err := os.Stat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	db, err := sql.Open("sqlite", dsn(path, "_pragma=busy_timeout(5000)"))
	if err != nil {
		return err
	}
	defer db.Close()
	var busy, logFrames, done int
	err = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done)
	switch {
	case err != nil:
		// Not a database (or a damaged one): its WAL is worth nothing.
		return errors.Join(os.Remove(path+"-wal"), ignoreMissing(os.Remove(path+"-shm")))
	case busy != 0:
		return fmt.Errorf("%w: %s: its WAL cannot be checkpointed (is a coordinator serving %s?)", ErrInUse, path, filepath.Dir(path))
	}
	return nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// syncFile fsyncs a file or a directory.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
