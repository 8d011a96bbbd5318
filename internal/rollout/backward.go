package rollout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// blockSource serves the uncompressed bytes of a log backward.
type blockSource interface {
	// size is the length of the uncompressed JSONL.
	size() int64
	// blockBefore returns some bytes that end exactly at end (start < end).
	blockBefore(end int64) (start int64, data []byte, err error)
}

// backwardCursor yields entries from the tail toward the head. It does not
// know line numbers.
type backwardCursor struct {
	name      string
	src       blockSource
	closer    io.Closer
	data      []byte // bytes [dataStart, dataStart+len(data))
	dataStart int64
	end       int64 // lines before end remain to be read
	ords      backwardOrdinals
	pending   *Entry // a record held back while the gap after it is reported
}

// newBackwardCursorTo reads the lines of src that end at or before end (a
// line boundary), last first. Only the real end of src can hold a torn tail.
func newBackwardCursorTo(name string, src blockSource, closer io.Closer, mode ordinalMode, end int64) *backwardCursor {
	if mode == modeUnknown {
		mode = modeV0
	}
	return &backwardCursor{name: name, src: src, closer: closer, end: end, dataStart: end, ords: backwardOrdinals{mode: mode}}
}

func (c *backwardCursor) Close() error {
	if c.closer != nil {
		return c.closer.Close()
	}
	return nil
}

// extend prepends the block before dataStart.
func (c *backwardCursor) extend() error {
	start, block, err := c.src.blockBefore(c.dataStart)
	if err != nil {
		return fmt.Errorf("rollout %s offset %d: %w", c.name, c.dataStart, err)
	}
	if start >= c.dataStart {
		return fmt.Errorf("rollout %s offset %d: empty block", c.name, c.dataStart)
	}
	joined := make([]byte, 0, len(block)+len(c.data))
	joined = append(joined, block...)
	c.data = append(joined, c.data...)
	c.dataStart = start
	return nil
}

// byteAt returns the byte at absolute offset off (off < end).
func (c *backwardCursor) byteAt(off int64) (byte, error) {
	for off < c.dataStart {
		if err := c.extend(); err != nil {
			return 0, err
		}
	}
	return c.data[off-c.dataStart], nil
}

// lineStart returns the start offset of the line whose content ends at
// contentEnd.
func (c *backwardCursor) lineStart(contentEnd int64) (int64, error) {
	for {
		if contentEnd > c.dataStart {
			i := bytes.LastIndexByte(c.data[:contentEnd-c.dataStart], '\n')
			if i >= 0 {
				return c.dataStart + int64(i) + 1, nil
			}
		}
		if c.dataStart == 0 {
			return 0, nil
		}
		if c.end-c.dataStart > MaxLineBytes+1 {
			return 0, fmt.Errorf("rollout %s offset %d: %w: no line start within %d bytes", c.name, contentEnd, ErrCorruptLine, MaxLineBytes)
		}
		if err := c.extend(); err != nil {
			return 0, err
		}
	}
}

func (c *backwardCursor) Next() (Entry, error) {
	if c.pending != nil {
		e := *c.pending
		c.pending = nil
		return e, nil
	}
	if c.end == 0 {
		return Entry{}, io.EOF
	}
	last := c.end == c.src.size()
	lineEnd := c.end
	b, err := c.byteAt(lineEnd - 1)
	if err != nil {
		return Entry{}, err
	}
	terminated := b == '\n'
	contentEnd := lineEnd
	if terminated {
		contentEnd--
	}
	start, err := c.lineStart(contentEnd)
	if err != nil {
		return Entry{}, err
	}
	line := bytes.Clone(c.data[start-c.dataStart : contentEnd-c.dataStart])
	size := int(lineEnd - start)
	c.end = start
	// Drop what is consumed so memory stays bounded by one block and one line.
	c.data = c.data[:start-c.dataStart]
	if !terminated {
		return Entry{}, &CorruptionError{Kind: ErrTornTail, Offset: start, Name: c.name,
			Detail: fmt.Sprintf("%d bytes without a final newline", size)}
	}
	rec, dmg := decodeChecked(c.name, line, 0, start)
	if dmg != nil {
		if last && errors.Is(dmg.Kind, ErrCorruptLine) {
			dmg.Kind = ErrTornTail
		}
		c.ords.damage()
		return Entry{}, dmg
	}
	e := Entry{Record: rec, Offset: start, Size: size}
	odmg, skip := c.ords.check(c.name, &rec, start)
	if odmg != nil {
		if !skip {
			c.pending = &e
		}
		return Entry{}, odmg
	}
	return e, nil
}

// readerAtBlocks serves a byte slice (or a plain file) through ReaderAt.
type readerAtBlocks struct {
	ra    io.ReaderAt
	n     int64
	block int64
}

func (s *readerAtBlocks) size() int64 { return s.n }

func (s *readerAtBlocks) blockBefore(end int64) (int64, []byte, error) {
	start := max(end-s.block, 0)
	buf := make([]byte, end-start)
	if _, err := s.ra.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, err
	}
	// Grow the block for the next call so long lines cost O(n log n).
	if s.block < 4<<20 {
		s.block *= 2
	}
	return start, buf, nil
}
