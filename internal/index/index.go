package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"

	"modernc.org/sqlite" // the pure-Go SQLite driver ("sqlite")
)

// Options tune a writable Index.
type Options struct {
	Logger *slog.Logger // nil: slog.Default()
	// BatchRecords is how many records catch-up commits per transaction; 0
	// means DefaultBatchRecords.
	BatchRecords int
	// Mirror is, for OpenFile, the data dir whose mirror files the prefix
	// of a history_base is read from ("": none, and such a rollout's view
	// is unknown). Open reads its own data dir's.
	Mirror string
	// mutant breaks the ledger on purpose: tests prove with it that the
	// property test can fail (lineage_property_test.go).
	mutant mutant
}

// mutant is a deliberate bug.
type mutant struct {
	// receiptsIgnoreView: a receipt is in effect only by its own row, never
	// by a view's prefix (a revert loses what it kept).
	receiptsIgnoreView bool
}

// DefaultBatchRecords is catch-up's transaction size.
const DefaultBatchRecords = 4096

// Index is the writable index of one data dir (or of a bare file). Its
// methods are safe for concurrent use: writes are serialized.
type Index struct {
	queries
	db   *sql.DB
	path string
	dir  string // the data dir; "" when opened with OpenFile
	// mirror is the data dir a history_base's prefix is read from: dir, or
	// Options.Mirror for OpenFile.
	mirror string
	log    *slog.Logger
	batch  int
	mu     sync.Mutex // serializes writes
	stmts  *stmtCache // guarded by mu
	mutant mutant
	// deferJudge: applies leave the deliveries to judgeAll (Rebuild and
	// VerifyIndex's private projections, judged once at the end).
	deferJudge bool
	// grp is the catch-up's open transaction over several rollouts (nil:
	// each batch is a transaction of its own).
	grp *group
	// anyPending: some rollout's view prefix was not read whole
	// (rollouts.base_pending); until then dependents has nothing to do.
	anyPending bool
}

// Reader is a read-only view of an index.db. It never writes, never takes
// the data dir LOCK, and reads a consistent snapshot per query while a
// coordinator writes the same file.
type Reader struct {
	queries
	db   *sql.DB
	path string
}

// Open opens (creating it if needed) the index of data dir dir for writing
// and caps every watermark at what the mirror holds: a rollout whose mirror
// file is gone is deleted from the index, and one whose file no longer holds
// the last indexed record where the watermark says is reset (its rows
// deleted) for CatchUp to index again. The caller holds the data dir's LOCK:
// one writer per index.
func Open(ctx context.Context, dir string, opt Options) (*Index, error) {
	if err := os.MkdirAll(datadir.RolloutsDir(dir), 0o700); err != nil {
		return nil, err
	}
	ix, err := OpenFile(ctx, datadir.IndexPath(dir), opt)
	if errors.Is(err, ErrSchema) {
		// Not an index this build can use: the index is derived from the
		// mirror, so start an empty one, which CatchUp fills from the
		// mirror files. One of an older schema is simply replaced; anything
		// else (garbage, a newer schema) is kept aside.
		log := opt.Logger
		if log == nil {
			log = slog.Default()
		}
		var se *SchemaError
		if errors.As(err, &se) && se.Found < SchemaVersion {
			if rerr := removeDB(datadir.IndexPath(dir)); rerr != nil {
				return nil, errors.Join(err, rerr)
			}
			log.Info("index: index.db has an older schema; rebuilding it from the mirror", "found", se.Found, "schema", SchemaVersion)
		} else {
			kept, aerr := setAside(datadir.IndexPath(dir))
			if aerr != nil {
				return nil, errors.Join(err, aerr)
			}
			log.Error("index: unusable index file set aside; rebuilding the index from the mirror", "err", err, "kept", kept)
		}
		ix, err = OpenFile(ctx, datadir.IndexPath(dir), opt)
	}
	if err != nil {
		return nil, err
	}
	ix.dir, ix.mirror = dir, dir
	if err := ix.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM rollouts WHERE base_pending = 1)`).Scan(&ix.anyPending); err != nil {
		ix.Close()
		return nil, err
	}
	if err := ix.capWatermarks(ctx); err != nil {
		ix.Close()
		return nil, err
	}
	return ix, nil
}

// OpenFile opens (creating it if needed) an index file for writing, without
// a data dir: no capping, and CatchUp is not available. Rebuild and verify
// use it for scratch indexes; tests use it with Apply.
func OpenFile(ctx context.Context, path string, opt Options) (*Index, error) {
	// Created 0600 whatever the umask or the data dir's mode (transcripts
	// are private); SQLite gives its -wal and -shm files the same mode.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	f.Close()
	// temp_store(MEMORY): the catch-up puts each rollout's batch in a
	// savepoint, and SQLite keeps the pages a savepoint first changes in a
	// sub-journal, a temporary file by default (a pwrite each): in memory
	// the catch-up does about a third more records a second.
	db, err := sql.Open("sqlite", dsn(path, "_pragma=journal_mode(WAL)", "_pragma=synchronous(NORMAL)",
		"_pragma=busy_timeout(10000)", "_pragma=temp_store(MEMORY)", "_txlock=immediate"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; its reads see its own writes
	if err := initSchema(ctx, db, path); err != nil {
		db.Close()
		return nil, err
	}
	ix := &Index{queries: queries{db: db}, db: db, path: path, log: opt.Logger, batch: opt.BatchRecords, stmts: newStmtCache(db),
		mirror: opt.Mirror, mutant: opt.mutant}
	if ix.log == nil {
		ix.log = slog.Default()
	}
	if ix.batch <= 0 {
		ix.batch = DefaultBatchRecords
	}
	return ix, nil
}

// notADatabase reports SQLite's SQLITE_NOTADB (26) and SQLITE_CORRUPT (11):
// the file is not an index at all.
func notADatabase(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == 26 || se.Code()&0xff == 11)
}

// setAside renames an unusable index file (and its -wal and -shm) to
// <file>.broken-<UTC time> and returns the new name.
func setAside(path string) (string, error) {
	kept := path + ".broken-" + time.Now().UTC().Format("20060102T150405Z")
	for _, ext := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+ext, kept+ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("index: set aside %s: %w", path+ext, err)
		}
	}
	return kept, nil
}

// OpenReader opens an index file read-only. It fails with ErrNoIndex when the
// file does not exist and ErrSchema when it is not an index of this version.
func OpenReader(ctx context.Context, path string) (*Reader, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoIndex, path)
	}
	db, err := sql.Open("sqlite", dsn(path, "mode=ro", "_pragma=busy_timeout(10000)", "_pragma=query_only(1)"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrSchema, path, err)
	}
	if v != SchemaVersion {
		db.Close()
		return nil, &SchemaError{Path: path, Found: v}
	}
	return &Reader{queries: queries{db: db}, db: db, path: path}, nil
}

// Close closes the reader.
func (r *Reader) Close() error { return r.db.Close() }

// Close closes the index; the last connection to close checkpoints the WAL
// into the file.
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.stmts.close()
	return ix.db.Close()
}

// Dir returns the data dir ("" for OpenFile).
func (ix *Index) Dir() string { return ix.dir }

func dsn(path string, params ...string) string {
	u := (&url.URL{Path: path}).EscapedPath()
	s := "file:" + u
	for i, p := range params {
		if i == 0 {
			s += "?"
		} else {
			s += "&"
		}
		s += p
	}
	return s
}

// initSchema creates the schema in an empty file and checks the version of
// an existing one.
func initSchema(ctx context.Context, db *sql.DB, path string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		if notADatabase(err) {
			return fmt.Errorf("%w: %s: %v", ErrSchema, path, err)
		}
		return fmt.Errorf("index %s: %w", path, err)
	}
	defer tx.Rollback()
	var v, tables int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSchema, path, err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSchema, path, err)
	}
	switch {
	case v == SchemaVersion:
		return nil
	case v != 0 || tables != 0:
		return &SchemaError{Path: path, Found: v}
	}
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("index %s: creating the schema: %w", path, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}
