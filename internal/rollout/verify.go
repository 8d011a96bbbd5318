package rollout

import (
	"errors"
	"fmt"
	"io"
)

// Findings of Verify that no cursor returns: they are about the log as a
// whole or about lines that are intact but fall short of what Logbook writes.
var (
	// ErrMissingCRC: a line without a crc (written by another tool). Only
	// reported with VerifyOptions.RequireCRC.
	ErrMissingCRC = errors.New("rollout: missing crc")
	// ErrNoSessionMeta: no session_meta record anywhere; not a rollout, or its
	// head was lost.
	ErrNoSessionMeta = errors.New("rollout: no session_meta record")
)

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// RequireCRC reports every record without a crc (ErrMissingCRC).
	RequireCRC bool
}

// VerifyReport is what one forward read of a log found.
type VerifyReport struct {
	Name       string
	Compressed bool // .jsonl.zst
	// SchemaVersion is the canonical session_meta's schema_version (0: a
	// version-0 Codex rollout); -1 when there is no session_meta.
	SchemaVersion int
	Lines         int // lines read, damaged ones included
	Records       int // intact records
	// End is the offset just past the last intact record (uncompressed):
	// where a repair cuts a torn tail.
	End int64
	// FirstOrdinal and LastOrdinal span the intact records' ordinals; both 0
	// when no record has one.
	FirstOrdinal, LastOrdinal int64
	WithCRC                   int // intact records that carry a crc
	// Problems are in file order. Each is a damage class a cursor returns
	// (ErrTornTail, ErrCorruptLine, ErrCRCMismatch, ErrOrdinalGap,
	// ErrOrdinalDuplicate, ErrMissingOrdinal) or a finding of Verify
	// (ErrMissingCRC, ErrNoSessionMeta). A damaged line accounts for the
	// ordinal it held, so a gap means records lost without a trace.
	Problems []*CorruptionError
}

// OK reports whether nothing is wrong.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

// ReadOnly reports whether the rollout was written by a newer schema version.
func (r *VerifyReport) ReadOnly() bool { return r.SchemaVersion > Version }

// Verify reads log forward once and reports every damaged line, every break
// in the ordinal sequence (which must start at 1), and, with opt.RequireCRC,
// every record without a crc. Damage is a finding, not an error: the error is
// for a log that cannot be read on (a missing file, a broken zstd frame), and
// comes with the report of what was read before it.
func Verify(log Log, opt VerifyOptions) (VerifyReport, error) {
	rep := VerifyReport{Name: log.Name(), SchemaVersion: -1}
	if c, ok := log.(interface{ Compressed() bool }); ok {
		rep.Compressed = c.Compressed()
	}
	cur, err := log.Forward(0)
	if err != nil {
		return rep, err
	}
	defer cur.Close()
	for {
		e, err := cur.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			if ce.Skipped() {
				rep.Lines++
			}
			rep.Problems = append(rep.Problems, ce)
			continue
		}
		if err != nil {
			return rep, err
		}
		rep.Lines++
		rep.Records++
		rep.End = e.End()
		rep.note(&e, opt)
	}
	if rep.SchemaVersion < 0 {
		rep.Problems = append(rep.Problems, &CorruptionError{Kind: ErrNoSessionMeta, Name: rep.Name,
			Detail: fmt.Sprintf("%d records read: not a rollout, or its head was lost", rep.Records)})
	}
	return rep, nil
}

// note takes in one intact record.
func (r *VerifyReport) note(e *Entry, opt VerifyOptions) {
	if e.CRC != "" {
		r.WithCRC++
	} else if opt.RequireCRC {
		r.Problems = append(r.Problems, &CorruptionError{Kind: ErrMissingCRC, Name: r.Name, Line: e.Line,
			Offset: e.Offset, Ordinal: e.Ordinal, Detail: "written without a crc"})
	}
	if e.Type == TypeSessionMeta && r.SchemaVersion < 0 {
		v, _ := LookupInt(e.Payload, "schema_version")
		r.SchemaVersion = int(v)
	}
	if e.Ordinal == 0 {
		return
	}
	if r.FirstOrdinal == 0 {
		r.FirstOrdinal = e.Ordinal
		// The cursor takes the first ordinal it sees as the start; a rollout
		// starts at 1, so anything above means its head is missing.
		if e.Ordinal != 1 {
			r.Problems = append(r.Problems, &CorruptionError{Kind: ErrOrdinalGap, Name: r.Name, Line: e.Line,
				Offset: e.Offset, Ordinal: e.Ordinal,
				Detail: fmt.Sprintf("expected ordinal 1, found %d (%d missing)", e.Ordinal, e.Ordinal-1)})
		}
	}
	r.LastOrdinal = max(r.LastOrdinal, e.Ordinal)
}

// KindName is the snake_case name of a damage class or finding, as the CLI
// and JSON outputs show it.
func KindName(kind error) string {
	switch {
	case errors.Is(kind, ErrTornTail):
		return "torn_tail"
	case errors.Is(kind, ErrCorruptLine):
		return "corrupt_line"
	case errors.Is(kind, ErrCRCMismatch):
		return "crc_mismatch"
	case errors.Is(kind, ErrOrdinalGap):
		return "ordinal_gap"
	case errors.Is(kind, ErrOrdinalDuplicate):
		return "ordinal_duplicate"
	case errors.Is(kind, ErrMissingOrdinal):
		return "missing_ordinal"
	case errors.Is(kind, ErrMissingCRC):
		return "missing_crc"
	case errors.Is(kind, ErrNoSessionMeta):
		return "no_session_meta"
	default:
		return "unknown"
	}
}
