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

// decodeChecked decodes a line and checks its crc; the ordinal sequence is checked
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

// ordinalMode says whether a log's records carry ordinals. The first valid
// record of the log (read from its head, whichever way the log is read)
// decides, so a cursor in either direction, from any line, agrees with a
// forward read from the head.
type ordinalMode uint8

const (
	modeUnknown  ordinalMode = iota // reading from the head: the first valid record decides
	modeV0                          // version 0 (Codex): ordinals are not checked
	modeOrdinals                    // every record carries one, in sequence
)

func modeOf(rec *Record) ordinalMode {
	if rec.Ordinal > 0 {
		return modeOrdinals
	}
	return modeV0
}

// Ordinals are checked between intact records. A damaged line between two of
// them (corrupt, crc mismatch, or without an ordinal) is reported for itself
// and accounts for one missing ordinal, so a gap is reported only for records
// no damaged line accounts for: one finding per lost line.

// forwardOrdinals checks ordinal continuity reading forward. The ordinals of
// the records it lets through strictly increase.
type forwardOrdinals struct {
	mode    ordinalMode
	last    int64 // the highest ordinal read; 0: none yet
	damaged int64 // damaged lines since the last record let through
}

// damage counts a damaged line.
func (c *forwardOrdinals) damage() { c.damaged++ }

// check returns the damage a record makes, if any; skip says the record must
// not be yielded.
func (c *forwardOrdinals) check(name string, rec *Record, lineNo int, off int64) (dmg *CorruptionError, skip bool) {
	if c.mode == modeUnknown {
		c.mode = modeOf(rec)
	}
	if c.mode == modeV0 {
		return nil, false
	}
	ord := rec.Ordinal
	switch {
	case ord == 0:
		c.damaged++
		return &CorruptionError{Kind: ErrMissingOrdinal, Name: name, Line: lineNo, Offset: off,
			Detail: fmt.Sprintf("after ordinal %d", c.last)}, true
	case c.last > 0 && ord <= c.last:
		return &CorruptionError{Kind: ErrOrdinalDuplicate, Name: name, Line: lineNo, Offset: off, Ordinal: ord,
			Detail: fmt.Sprintf("ordinal %d after ordinal %d", ord, c.last)}, true
	case c.last > 0 && ord > c.last+1+c.damaged:
		dmg = &CorruptionError{Kind: ErrOrdinalGap, Name: name, Line: lineNo, Offset: off, Ordinal: ord,
			Detail: gapDetail(c.last, ord, c.damaged)}
	}
	c.last, c.damaged = ord, 0
	return dmg, false
}

func gapDetail(before, after, damaged int64) string {
	d := fmt.Sprintf("expected ordinal %d, found %d (%d missing", before+1, after, after-before-1)
	if damaged > 0 {
		d += fmt.Sprintf(", %d of them on damaged lines", damaged)
	}
	return d + ")"
}

// backwardOrdinals checks ordinal continuity reading backward: the mirror of
// forwardOrdinals. The ordinals of the records it lets through strictly
// decrease, so where ordinals never go back both directions yield the same
// records and report the same damage; where they do, both report a
// duplicate, but not always on the same line: which copy is out depends on
// the side the reader comes from.
type backwardOrdinals struct {
	mode    ordinalMode // never modeUnknown: the head is read first
	next    int64       // the lowest ordinal yielded; 0: none yet
	nextOff int64       // and the offset of its line
	damaged int64       // damaged lines since the last record let through
}

func (c *backwardOrdinals) damage() { c.damaged++ }

// check returns the damage a record makes: a gap belongs to the later record
// already yielded (its ordinal and offset), the other kinds to this one.
func (c *backwardOrdinals) check(name string, rec *Record, off int64) (dmg *CorruptionError, skip bool) {
	if c.mode == modeV0 {
		return nil, false
	}
	ord := rec.Ordinal
	switch {
	case ord == 0:
		c.damaged++
		return &CorruptionError{Kind: ErrMissingOrdinal, Name: name, Offset: off,
			Detail: fmt.Sprintf("before ordinal %d", c.next)}, true
	case c.next > 0 && ord >= c.next:
		return &CorruptionError{Kind: ErrOrdinalDuplicate, Name: name, Offset: off, Ordinal: ord,
			Detail: fmt.Sprintf("ordinal %d before ordinal %d", ord, c.next)}, true
	case c.next > 0 && ord < c.next-1-c.damaged:
		dmg = &CorruptionError{Kind: ErrOrdinalGap, Name: name, Offset: c.nextOff, Ordinal: c.next,
			Detail: gapDetail(ord, c.next, c.damaged)}
	}
	c.next, c.nextOff, c.damaged = ord, off, 0
	return dmg, false
}
