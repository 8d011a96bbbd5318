package index

import (
	"errors"
	"fmt"
)

var (
	// ErrOutOfOrder is wrapped by *OrderError: a batch that does not start
	// right after the rollout's watermark. Nothing of it was written.
	ErrOutOfOrder = errors.New("index: batch does not follow the watermark")
	// ErrBadBatch: a batch that is not a run of one rollout's records in
	// order (ordinals not consecutive, version-0 entries without line
	// numbers, records with and without ordinals mixed). Nothing was written.
	ErrBadBatch = errors.New("index: malformed batch")
	// ErrWrongRollout: the canonical session_meta names another rollout than
	// the one the batch is applied to (the mirror file's name).
	ErrWrongRollout = errors.New("index: record of another rollout")
	// ErrSchema: index.db was written by another schema version, or is not an
	// index at all; rebuild it (coordinator reindex).
	ErrSchema = errors.New("index: schema version mismatch")
	// ErrNoIndex: the data dir has no index.db yet.
	ErrNoIndex = errors.New("index: no index")
	// ErrUnknownThread: no indexed thread has that id (or id prefix).
	ErrUnknownThread = errors.New("index: unknown thread")
	// ErrAmbiguousThread: an id prefix names more than one thread.
	ErrAmbiguousThread = errors.New("index: ambiguous thread id prefix")
	// ErrBadCursor: a threads cursor that this index did not hand out, or
	// that belongs to another search.
	ErrBadCursor = errors.New("index: invalid cursor")
	// ErrBadQuery: a query the index cannot answer as asked (an unknown
	// delivery state, a negative limit).
	ErrBadQuery = errors.New("index: bad query")
	// ErrMirrorDamaged: catch-up stopped at damage in a mirror file (a
	// corrupt line or an ordinal gap in a rollout with ordinals). The index
	// keeps what comes before it and lags; verify --data names the line.
	ErrMirrorDamaged = errors.New("index: mirror file damaged")
)

// SchemaError is an index file of another schema version than this
// build's (SchemaVersion). It wraps ErrSchema.
type SchemaError struct {
	Path  string
	Found int // its PRAGMA user_version
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("index: %s has schema version %d; this build reads and writes %d (rebuild it: coordinator reindex)",
		e.Path, e.Found, SchemaVersion)
}

func (e *SchemaError) Unwrap() error { return ErrSchema }

// OrderError is a batch refused because its first record does not follow
// the stored watermark.
type OrderError struct {
	Rollout string
	// Lines: the rollout has no ordinals (version 0); ordinals here are line
	// numbers.
	Lines bool
	// Watermark is the last ordinal indexed and WatermarkOffset the byte
	// offset just past it; First and FirstOffset are the batch's first.
	Watermark, WatermarkOffset int64
	First, FirstOffset         int64
}

func (e *OrderError) Error() string {
	unit := "ordinal"
	if e.Lines {
		unit = "line"
	}
	return fmt.Sprintf("index: rollout %s: batch starts at %s %d (offset %d), the watermark is %s %d (offset %d): %v",
		e.Rollout, unit, e.First, e.FirstOffset, unit, e.Watermark, e.WatermarkOffset, ErrOutOfOrder)
}

func (e *OrderError) Unwrap() error { return ErrOutOfOrder }

// Behind reports whether the batch starts at or before the watermark: its
// records (or some) are indexed already, and the caller may drop them.
// Otherwise records are missing between the watermark and the batch, and
// the caller must catch up from the mirror file (CatchUpRollout).
func (e *OrderError) Behind() bool { return e.First <= e.Watermark }
