package rollout

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
)

// MaxLineBytes bounds one line; a longer one is corrupt. It is far above the
// writer's record limit.
const MaxLineBytes = 256 << 20

// Cursor yields a log's entries one at a time.
//
// Next returns io.EOF at the end, a *CorruptionError for a damaged line (call
// Next again to go on), or another error when reading is impossible.
type Cursor interface {
	Next() (Entry, error)
	Close() error
}

// forwardCursor reads lines from r, which starts at byte offset off.
type forwardCursor struct {
	name    string
	br      *bufio.Reader
	closer  io.Closer
	off     int64
	line    int // number of the next line; 0 when unknown
	ords    forwardOrdinals
	pending *Entry // a record held back while its gap is reported
	done    bool
}

func newForwardCursor(name string, r io.Reader, closer io.Closer, off int64, mode ordinalMode) *forwardCursor {
	c := &forwardCursor{name: name, br: bufio.NewReaderSize(r, 32<<10), closer: closer, off: off, ords: forwardOrdinals{mode: mode}}
	if off == 0 {
		c.line = 1
	}
	return c
}

func (c *forwardCursor) Close() error {
	if c.closer != nil {
		return c.closer.Close()
	}
	return nil
}

// readLine returns the next line without its '\n', whether it was
// terminated, and its size in bytes.
func (c *forwardCursor) readLine() (line []byte, terminated bool, size int, err error) {
	var buf []byte
	for {
		frag, err := c.br.ReadSlice('\n')
		switch {
		case err == nil:
			if buf == nil {
				buf = make([]byte, len(frag)-1)
				copy(buf, frag)
			} else {
				buf = append(buf, frag[:len(frag)-1]...)
			}
			return buf, true, len(buf) + 1, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(buf)+len(frag) > MaxLineBytes {
				// Too long to be a record: skip to the end of the line.
				n := len(buf) + len(frag)
				for {
					more, err := c.br.ReadSlice('\n')
					n += len(more)
					if err == nil {
						return nil, true, n, nil
					}
					if !errors.Is(err, bufio.ErrBufferFull) {
						return nil, false, n, nil
					}
				}
			}
			buf = append(buf, frag...)
		case errors.Is(err, io.EOF):
			buf = append(buf, frag...)
			if len(buf) == 0 {
				return nil, false, 0, io.EOF
			}
			return buf, false, len(buf), nil
		default:
			return nil, false, 0, fmt.Errorf("rollout %s offset %d: %w", c.name, c.off, err)
		}
	}
}

func (c *forwardCursor) Next() (Entry, error) {
	if c.pending != nil {
		e := *c.pending
		c.pending = nil
		return e, nil
	}
	if c.done {
		return Entry{}, io.EOF
	}
	line, terminated, size, err := c.readLine()
	if errors.Is(err, io.EOF) {
		c.done = true
		return Entry{}, io.EOF
	}
	if err != nil {
		return Entry{}, err
	}
	off, lineNo := c.off, c.line
	c.off += int64(size)
	if c.line > 0 {
		c.line++
	}
	if !terminated {
		c.done = true
		return Entry{}, &CorruptionError{Kind: ErrTornTail, Name: c.name, Line: lineNo, Offset: off,
			Detail: fmt.Sprintf("%d bytes without a final newline", size)}
	}
	if line == nil {
		c.ords.damage()
		return Entry{}, &CorruptionError{Kind: ErrCorruptLine, Name: c.name, Line: lineNo, Offset: off,
			Detail: fmt.Sprintf("line of %d bytes exceeds the %d-byte limit", size, MaxLineBytes)}
	}
	rec, dmg := decodeChecked(c.name, line, lineNo, off)
	if dmg != nil {
		if errors.Is(dmg.Kind, ErrCorruptLine) && c.atEOF() {
			dmg.Kind = ErrTornTail // the last line: a write cut short
		}
		c.ords.damage()
		return Entry{}, dmg
	}
	e := Entry{Record: rec, Line: lineNo, Offset: off, Size: size}
	odmg, skip := c.ords.check(c.name, &rec, lineNo, off)
	if odmg != nil {
		if !skip {
			c.pending = &e
		}
		return Entry{}, odmg
	}
	return e, nil
}

func (c *forwardCursor) atEOF() bool {
	_, err := c.br.Peek(1)
	return err != nil
}

// headMode reads a log from its head (r) to its first valid record, which
// decides whether the log's records carry ordinals; modeUnknown when r holds
// none.
func headMode(name string, r io.Reader) (ordinalMode, error) {
	c := newForwardCursor(name, r, nil, 0, modeUnknown)
	for {
		line, terminated, _, err := c.readLine()
		if errors.Is(err, io.EOF) || (err == nil && !terminated) {
			return modeUnknown, nil
		}
		if err != nil {
			return modeUnknown, err
		}
		if line == nil {
			continue // longer than MaxLineBytes
		}
		if rec, dmg := decodeChecked(name, line, 0, 0); dmg == nil {
			return modeOf(&rec), nil
		}
	}
}

// checkLineStart checks that off is a line start: 0, or just after a '\n'.
func checkLineStart(name string, ra io.ReaderAt, off int64) error {
	if off == 0 {
		return nil
	}
	var b [1]byte
	if _, err := ra.ReadAt(b[:], off-1); err != nil {
		return fmt.Errorf("rollout %s offset %d: %w", name, off, err)
	}
	if b[0] != '\n' {
		return fmt.Errorf("rollout %s offset %d: %w", name, off, ErrNotLineStart)
	}
	return nil
}

// ErrNotLineStart is returned for a read from an offset that does not start
// a line (a stale or wrong checkpoint locator).
var ErrNotLineStart = errors.New("rollout: offset does not start a line")

// countLines returns, for each offset, the 1-based number of the line that
// starts there, reading r from its start once.
func countLines(r io.Reader, offsets []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(offsets))
	if len(offsets) == 0 {
		return out, nil
	}
	sorted := append([]int64(nil), offsets...)
	slices.Sort(sorted)
	buf := make([]byte, 256<<10)
	var pos int64
	lines := 1
	next := 0
	for next < len(sorted) {
		for next < len(sorted) && sorted[next] <= pos {
			out[sorted[next]] = lines
			next++
		}
		if next >= len(sorted) {
			break
		}
		n, err := r.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 && next < len(sorted) {
			want := sorted[next] - pos
			if want > int64(len(chunk)) {
				lines += bytes.Count(chunk, []byte{'\n'})
				pos += int64(len(chunk))
				chunk = nil
				break
			}
			lines += bytes.Count(chunk[:want], []byte{'\n'})
			pos += want
			chunk = chunk[want:]
			for next < len(sorted) && sorted[next] == pos {
				out[sorted[next]] = lines
				next++
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
	}
	return out, nil
}

// Scan reads a cursor to its end and closes it. Each damaged line goes to
// onDamage (nil: skipped silently; an error from it stops the scan); each
// record to fn, which returns false to stop early.
func Scan(c Cursor, onDamage func(*CorruptionError) error, fn func(Entry) (bool, error)) error {
	defer c.Close()
	for {
		e, err := c.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			if onDamage != nil {
				if err := onDamage(ce); err != nil {
					return err
				}
			}
			continue
		}
		if err != nil {
			return err
		}
		more, err := fn(e)
		if err != nil || !more {
			return err
		}
	}
}
