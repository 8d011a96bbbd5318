package rollout

import "fmt"

// Entry is a record with its place in the log.
type Entry struct {
	Record
	Line   int   // 1-based line number; 0 when the reader does not know it
	Offset int64 // byte offset of the line in the uncompressed JSONL
	Size   int   // bytes of the line including its '\n'
}

// End is the offset just past the entry's line.
func (e *Entry) End() int64 { return e.Offset + int64(e.Size) }

// lineCheck decodes a line and checks its crc; the ordinal sequence is checked
// by the cursor, which knows the direction.
func decodeChecked(name string, line []byte, lineNo int, off int64) (Record, *CorruptionError) {
	rec, err := DecodeLine(line)
	if err != nil {
		return Record{}, &CorruptionError{Kind: ErrCorruptLine, Name: name, Line: lineNo, Offset: off, Detail: err.Error()}
	}
	if !rec.CRCOK() {
		return Record{}, &CorruptionError{Kind: ErrCRCMismatch, Name: name, Line: lineNo, Offset: off, Ordinal: rec.Ordinal,
			Detail: fmt.Sprintf("crc %s, payload checksums to %s", rec.CRC, Checksum(rec.Payload))}
	}
	return rec, nil
}

// forwardOrdinals checks ordinal continuity reading forward.
type forwardOrdinals struct {
	last   int64
	seen   bool // an ordinal has been seen
	anyRec bool
}

// check returns the damage a record with ordinal ord makes, if any; skip says
// the record must not be yielded.
func (c *forwardOrdinals) check(name string, rec *Record, lineNo int, off int64) (dmg *CorruptionError, skip bool) {
	defer func() { c.anyRec = true }()
	ord := rec.Ordinal
	if ord == 0 {
		if c.seen {
			return &CorruptionError{Kind: ErrMissingOrdinal, Name: name, Line: lineNo, Offset: off,
				Detail: fmt.Sprintf("after ordinal %d", c.last)}, true
		}
		return nil, false
	}
	if !c.seen {
		c.seen, c.last = true, ord
		if c.anyRec {
			return &CorruptionError{Kind: ErrMissingOrdinal, Name: name, Line: lineNo, Offset: off, Ordinal: ord,
				Detail: "earlier lines have no ordinal"}, false
		}
		return nil, false
	}
	switch {
	case ord == c.last+1:
		c.last = ord
		return nil, false
	case ord > c.last+1:
		dmg = &CorruptionError{Kind: ErrOrdinalGap, Name: name, Line: lineNo, Offset: off, Ordinal: ord,
			Detail: fmt.Sprintf("expected ordinal %d, found %d (%d missing)", c.last+1, ord, ord-c.last-1)}
		c.last = ord
		return dmg, false
	default:
		return &CorruptionError{Kind: ErrOrdinalDuplicate, Name: name, Line: lineNo, Offset: off, Ordinal: ord,
			Detail: fmt.Sprintf("ordinal %d after ordinal %d", ord, c.last)}, true
	}
}

// backwardOrdinals checks ordinal continuity reading backward.
type backwardOrdinals struct {
	next    int64 // ordinal of the later record already yielded
	nextOff int64
	seen    bool
}

func (c *backwardOrdinals) check(name string, rec *Record, off int64) (dmg *CorruptionError, skip bool) {
	ord := rec.Ordinal
	if ord == 0 {
		if c.seen {
			return &CorruptionError{Kind: ErrMissingOrdinal, Name: name, Offset: off,
				Detail: fmt.Sprintf("before ordinal %d", c.next)}, true
		}
		return nil, false
	}
	if !c.seen {
		c.seen, c.next, c.nextOff = true, ord, off
		return nil, false
	}
	switch {
	case ord == c.next-1:
		c.next, c.nextOff = ord, off
		return nil, false
	case ord < c.next-1:
		dmg = &CorruptionError{Kind: ErrOrdinalGap, Name: name, Offset: c.nextOff, Ordinal: c.next,
			Detail: fmt.Sprintf("expected ordinal %d, found %d (%d missing)", ord+1, c.next, c.next-ord-1)}
		c.next, c.nextOff = ord, off
		return dmg, false
	default:
		return &CorruptionError{Kind: ErrOrdinalDuplicate, Name: name, Offset: off, Ordinal: ord,
			Detail: fmt.Sprintf("ordinal %d before ordinal %d", ord, c.next)}, true
	}
}
