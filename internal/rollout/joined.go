package rollout

import (
	"errors"
	"fmt"
	"io"
)

// Segment is a byte range [From, To) of a log; To < 0 means to its end (only
// the last segment of a Joined may be open-ended).
type Segment struct {
	Log      Log
	From, To int64
}

// Joined reads several logs as one: how a thread forked by reference or
// reverted is read — its own session_meta, the frozen prefix of the rollout
// its history_base names, then its own records. Offsets are virtual: the
// segments laid end to end. Each segment keeps its own ordinal and crc
// checks. Line numbers are counted across the segments.
type Joined struct {
	name  string
	segs  []Segment
	start []int64 // virtual offset of each segment's first byte
}

var _ Log = (*Joined)(nil)

// ErrNotJoinable is returned for segments Joined cannot read.
var ErrNotJoinable = errors.New("rollout: cannot join")

// backwardToer is implemented by the logs of this package.
type backwardToer interface {
	backwardTo(end int64) (Cursor, error)
}

// NewJoined joins segments. Every segment but the last must be closed, and
// every log must be a *File, *Mem or *Joined.
func NewJoined(name string, segs ...Segment) (*Joined, error) {
	j := &Joined{name: name, segs: segs}
	var v int64
	for i, s := range segs {
		if _, ok := s.Log.(backwardToer); !ok {
			return nil, fmt.Errorf("%w: %s segment %d is a %T", ErrNotJoinable, name, i, s.Log)
		}
		if s.To < 0 && i != len(segs)-1 {
			return nil, fmt.Errorf("%w: %s segment %d is open-ended but not last", ErrNotJoinable, name, i)
		}
		if s.From < 0 || (s.To >= 0 && s.To < s.From) {
			return nil, fmt.Errorf("%w: %s segment %d range [%d,%d)", ErrNotJoinable, name, i, s.From, s.To)
		}
		j.start = append(j.start, v)
		if s.To >= 0 {
			v += s.To - s.From
		}
	}
	return j, nil
}

// Name implements Log.
func (j *Joined) Name() string { return j.name }

// Segments returns the virtual range of segment i: [start, end); end is -1
// for an open-ended last segment.
func (j *Joined) Segments() [][2]int64 {
	out := make([][2]int64, len(j.segs))
	for i, s := range j.segs {
		end := int64(-1)
		if s.To >= 0 {
			end = j.start[i] + s.To - s.From
		}
		out[i] = [2]int64{j.start[i], end}
	}
	return out
}

// segmentAt returns the segment holding virtual offset v.
func (j *Joined) segmentAt(v int64) int {
	for i := len(j.segs) - 1; i >= 0; i-- {
		if v >= j.start[i] {
			return i
		}
	}
	return 0
}

// joinedCursor walks the segments in one direction.
type joinedCursor struct {
	j        *Joined
	i        int // current segment
	cur      Cursor
	forward  bool
	firstOff int64 // forward: the offset to start the first segment at
}

// Forward implements Log.
func (j *Joined) Forward(from int64) (Cursor, error) {
	if from < 0 {
		return nil, fmt.Errorf("rollout %s offset %d: %w", j.name, from, ErrNotLineStart)
	}
	i := j.segmentAt(from)
	s := j.segs[i]
	return &joinedCursor{j: j, i: i, forward: true, firstOff: s.From + (from - j.start[i])}, nil
}

// Backward implements Log.
func (j *Joined) Backward() (Cursor, error) {
	return &joinedCursor{j: j, i: len(j.segs) - 1}, nil
}

func (j *Joined) backwardTo(end int64) (Cursor, error) {
	if end < 0 {
		return j.Backward()
	}
	i := j.segmentAt(end)
	if end == j.start[i] && i > 0 {
		i-- // end falls on a boundary: the segment before ends there
	}
	c := &joinedCursor{j: j, i: i}
	s := j.segs[i]
	cur, err := s.Log.(backwardToer).backwardTo(s.From + (end - j.start[i]))
	if err != nil {
		return nil, err
	}
	c.cur = cur
	return c, nil
}

func (c *joinedCursor) open() error {
	s := c.j.segs[c.i]
	var err error
	if c.forward {
		from := s.From
		if c.firstOff >= 0 {
			from, c.firstOff = c.firstOff, -1
		}
		c.cur, err = s.Log.Forward(from)
	} else {
		c.cur, err = s.Log.(backwardToer).backwardTo(s.To)
	}
	return err
}

// Next implements Cursor: entries and damage of the segment, their offsets
// made virtual.
func (c *joinedCursor) Next() (Entry, error) {
	for {
		if c.cur == nil {
			if c.i < 0 || c.i >= len(c.j.segs) {
				return Entry{}, io.EOF
			}
			if err := c.open(); err != nil {
				return Entry{}, err
			}
		}
		e, err := c.cur.Next()
		var ce *CorruptionError
		off := e.Offset
		switch {
		case errors.Is(err, io.EOF):
			c.advance()
			continue
		case errors.As(err, &ce):
			off = ce.Offset
		case err != nil:
			return Entry{}, err
		}
		switch c.place(off) {
		case before:
			continue // not yet in the segment (cannot happen with bounded cursors)
		case after:
			c.advance()
			continue
		}
		v := c.j.start[c.i] + off - c.j.segs[c.i].From
		if ce != nil {
			ce.Offset, ce.Line, ce.Name = v, 0, c.j.name
			return Entry{}, ce
		}
		e.Offset, e.Line = v, 0
		return e, nil
	}
}

const (
	inside = iota
	before // not reached yet in the cursor's direction
	after  // beyond the segment in the cursor's direction
)

// place says where a segment offset lies for the cursor's direction.
func (c *joinedCursor) place(off int64) int {
	s := c.j.segs[c.i]
	below, above := off < s.From, s.To >= 0 && off >= s.To
	switch {
	case c.forward && below, !c.forward && above:
		return before
	case c.forward && above, !c.forward && below:
		return after
	}
	return inside
}

// advance closes the current segment's cursor and moves to the next one.
func (c *joinedCursor) advance() {
	c.cur.Close()
	c.cur = nil
	if c.forward {
		c.i++
	} else {
		c.i--
	}
}

// Close implements Cursor.
func (c *joinedCursor) Close() error {
	if c.cur != nil {
		return c.cur.Close()
	}
	return nil
}

// LineNumbers implements Log by counting the lines of the segments laid end
// to end: each segment's newlines are counted by its own log's LineNumbers
// (a newline count from its head, which decodes nothing), so the cost is a
// byte scan, not a parse, of what lies before the last offset asked for.
func (j *Joined) LineNumbers(offsets []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(offsets))
	if len(offsets) == 0 {
		return out, nil
	}
	byseg := map[int][]int64{}
	maxSeg := 0
	for _, o := range offsets {
		i := j.segmentAt(o)
		if s := j.segs[i]; s.To >= 0 && o-j.start[i] >= s.To-s.From && i+1 < len(j.segs) {
			i++ // at a boundary: the next segment's first line
		}
		byseg[i] = append(byseg[i], o)
		maxSeg = max(maxSeg, i)
	}
	before := 0 // lines in the segments before i
	for i := 0; i <= maxSeg; i++ {
		s := j.segs[i]
		want := []int64{s.From}
		for _, o := range byseg[i] {
			want = append(want, s.From+o-j.start[i])
		}
		if i < maxSeg {
			want = append(want, s.To)
		}
		lines, err := s.Log.LineNumbers(want)
		if err != nil {
			return nil, err
		}
		first, ok := lines[s.From]
		if !ok {
			return nil, fmt.Errorf("rollout %s segment %d: offset %d is beyond its log", j.name, i, s.From)
		}
		for _, o := range byseg[i] {
			if n, ok := lines[s.From+o-j.start[i]]; ok {
				out[o] = before + n - first + 1
			}
		}
		if i < maxSeg {
			end, ok := lines[s.To]
			if !ok {
				return nil, fmt.Errorf("rollout %s segment %d: offset %d is beyond its log", j.name, i, s.To)
			}
			before += end - first
		}
	}
	return out, nil
}
