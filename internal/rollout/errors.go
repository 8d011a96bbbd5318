package rollout

import (
	"errors"
	"fmt"
)

// Damage classes (DESIGN §4 rule 8). A *CorruptionError wraps one of them.
var (
	ErrTornTail         = errors.New("rollout: torn tail")
	ErrCorruptLine      = errors.New("rollout: corrupt line")
	ErrCRCMismatch      = errors.New("rollout: crc mismatch")
	ErrOrdinalGap       = errors.New("rollout: ordinal gap")
	ErrOrdinalDuplicate = errors.New("rollout: duplicate ordinal")
	ErrMissingOrdinal   = errors.New("rollout: missing ordinal")
)

// ErrReadOnly is returned when appending to a rollout written by a newer
// schema version.
var ErrReadOnly = errors.New("rollout: written by a newer schema version; read-only")

// CorruptionError is one damaged line. Readers return it from Next and go on
// with the following line.
type CorruptionError struct {
	Kind    error  // one of the Err* damage classes
	Name    string // the log's name (a file path)
	Line    int    // 1-based; 0 when the reader does not know it
	Offset  int64  // byte offset of the damaged line (or, for a gap, of the line after it)
	Ordinal int64  // the ordinal found there, when there is one
	Detail  string
}

func (e *CorruptionError) Error() string {
	loc := e.Name
	if e.Line > 0 {
		loc += fmt.Sprintf(" line %d", e.Line)
	}
	loc += fmt.Sprintf(" offset %d", e.Offset)
	if e.Ordinal > 0 {
		loc += fmt.Sprintf(" ordinal %d", e.Ordinal)
	}
	msg := fmt.Sprintf("%s: %v", loc, e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *CorruptionError) Unwrap() error { return e.Kind }

// Torn reports whether the damage is a torn tail (harmless on read).
func (e *CorruptionError) Torn() bool { return errors.Is(e.Kind, ErrTornTail) }

// Skipped reports whether the damaged line yields no record. A gap names
// the (valid) record after it, which is still returned: right after the
// report reading forward, right before it reading backward.
func (e *CorruptionError) Skipped() bool { return !errors.Is(e.Kind, ErrOrdinalGap) }
