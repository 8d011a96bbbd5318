package rollout

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestForwardBackward: for every valid file, the backward read is exactly the
// forward read in opposite order, each record the bytes of its line, and the
// in-memory log reads like the file.
func TestForwardBackward(t *testing.T) {
	for _, path := range validFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data := readFile(t, path)
			f := openFile(t, path)
			fwd := forward(t, f, 0)
			starts := lineStarts(data)
			if len(fwd) != len(starts) {
				t.Fatalf("%d steps for %d lines", len(fwd), len(starts))
			}
			for i, s := range fwd {
				if s.Kind != nil {
					t.Fatalf("damage in a valid file: %v", s)
				}
				end := int64(len(data))
				if i+1 < len(starts) {
					end = starts[i+1]
				}
				if s.Line != i+1 || s.Off != starts[i] || s.Off+int64(s.Size) != end || s.Raw != string(data[s.Off:end-1]) {
					t.Fatalf("entry %d: %v, want line %d at %d", i, s, i+1, starts[i])
				}
			}
			diffSteps(t, "backward", backward(t, f), reversed(fwd))
			m := NewMem(path, data)
			diffSteps(t, "Mem forward", forward(t, m, 0), fwd)
			diffSteps(t, "Mem backward", backward(t, m), reversed(fwd))
		})
	}
}

// TestForwardFrom: a forward read from any line start yields the rest of
// the log; an offset inside a line is refused with ErrNotLineStart.
func TestForwardFrom(t *testing.T) {
	paths := []string{smallCodex(t), codexPath(t, "019c8bfe-ec25-79e0-97d7-bda6a9c575ff")}
	for _, name := range []string{"v1-all.jsonl", "missing-ordinal.jsonl", "corrupt-middle.jsonl", "torn-unterminated.jsonl"} {
		paths = append(paths, filepath.Join(goldenDir, name))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data := readFile(t, path)
			logs := []Log{openFile(t, path), NewMem(path, data)}
			for _, l := range logs {
				all := forward(t, l, 0)
				for _, from := range lineStarts(data)[1:] {
					diffSteps(t, "Forward(from)", forward(t, l, from), suffix(all, from))
				}
				if bytes.HasSuffix(data, []byte("\n")) {
					if got := forward(t, l, int64(len(data))); len(got) != 0 {
						t.Errorf("Forward(end) yields %v", got)
					}
				} else if _, err := l.Forward(int64(len(data))); !errors.Is(err, ErrNotLineStart) {
					t.Errorf("Forward(end) after a torn line = %v, want ErrNotLineStart", err)
				}
				for _, from := range []int64{1, lineStarts(data)[1] - 1, lineStarts(data)[1] + 1} {
					if _, err := l.Forward(from); !errors.Is(err, ErrNotLineStart) {
						t.Errorf("%T Forward(%d) = %v, want ErrNotLineStart", l, from, err)
					}
				}
				if _, err := l.Forward(-1); err == nil {
					t.Errorf("%T Forward(-1) succeeds", l)
				}
				if _, err := l.Forward(int64(len(data)) + 1); err == nil {
					t.Errorf("%T Forward beyond the end succeeds", l)
				}
			}
		})
	}
}

// TestForwardFromKeepsTheRules: a read from the middle of a v1 log still knows
// the log carries ordinals, so a line without one is reported, not yielded.
func TestForwardFromKeepsTheRules(t *testing.T) {
	data := readFile(t, filepath.Join(goldenDir, "missing-ordinal.jsonl"))
	from := lineStarts(data)[dmgNoOrdLine-1]
	got := forward(t, NewMem("m", data), from)
	if len(got) == 0 || !errors.Is(got[0].Kind, ErrMissingOrdinal) || got[0].Off != from {
		t.Fatalf("Forward(%d) starts with %v, want the missing ordinal", from, got[0])
	}
	// With nothing intact before from, the first record read decides, as it
	// does for a read from the head.
	all := encodeAll(v1All())
	noOrd, _ := DecodeLine([]byte(all[3]))
	noOrd.Raw, noOrd.Ordinal = nil, 0
	lost := join([]string{"{garbage", "[]", all[2], string(noOrd.Append(nil)), all[4]})
	from = lineStarts(lost)[2]
	m := NewMem("lost", lost)
	diffSteps(t, "Forward(from) after a lost head", forward(t, m, from), suffix(forward(t, m, 0), from))
	if d := damage(forward(t, m, from)); len(d) != 1 || !errors.Is(d[0].Kind, ErrMissingOrdinal) {
		t.Errorf("Forward(from) after a lost head: %v", d)
	}
	// A version-0 log read from the middle checks nothing.
	codex := readFile(t, smallCodex(t))
	if d := damage(forward(t, NewMem("c", codex), lineStarts(codex)[5])); len(d) != 0 {
		t.Errorf("version-0 log read from the middle reports %v", d)
	}
}

func TestLineNumbers(t *testing.T) {
	for _, path := range append(validFiles(t), filepath.Join(goldenDir, "torn-unterminated.jsonl")) {
		data := readFile(t, path)
		starts := lineStarts(data)
		offsets := append([]int64{}, starts...)
		// Shuffled order, a duplicate, offsets inside lines, the end.
		offsets = append(offsets, starts[len(starts)/2], starts[1]+5, starts[len(starts)-1]+1, int64(len(data)))
		for i, j := 0, len(offsets)-1; i < j; i, j = i+1, j-1 {
			offsets[i], offsets[j] = offsets[j], offsets[i]
		}
		for _, l := range []Log{openFile(t, path), NewMem(path, data)} {
			got, err := l.LineNumbers(offsets)
			if err != nil {
				t.Fatal(err)
			}
			for i, off := range starts {
				if got[off] != i+1 {
					t.Fatalf("%s: line at offset %d is %d, want %d", path, off, got[off], i+1)
				}
			}
			if got[starts[1]+5] != 2 || got[starts[len(starts)-1]+1] != len(starts) {
				t.Errorf("%s: offsets inside lines: %d %d", path, got[starts[1]+5], got[starts[len(starts)-1]+1])
			}
			if want := bytes.Count(data, []byte("\n")) + 1; got[int64(len(data))] != want {
				t.Errorf("%s: end of log is line %d, want %d", path, got[int64(len(data))], want)
			}
		}
	}
	got, err := NewMem("e", nil).LineNumbers(nil)
	if err != nil || len(got) != 0 {
		t.Errorf("LineNumbers(nil) = %v, %v", got, err)
	}
}

// TestLineNumbersMatchForward: the line numbers a forward read knows are the
// ones LineNumbers computes, so a backward finding can be named by line.
func TestLineNumbersMatchForward(t *testing.T) {
	path := codexPath(t, "019c8a59-e9dd-71f0-9ae3-4079fe9726a9") // the largest: 2,722 lines, 1 MB
	f := openFile(t, path)
	fwd := forward(t, f, 0)
	var offs []int64
	for _, s := range fwd {
		offs = append(offs, s.Off)
	}
	got, err := f.LineNumbers(offs)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range fwd {
		if got[s.Off] != s.Line {
			t.Fatalf("offset %d: LineNumbers %d, forward read %d", s.Off, got[s.Off], s.Line)
		}
	}
	diffSteps(t, "backward", backward(t, f), reversed(fwd))
}

// TestEdgeLogs: empty logs, blank lines, a log that is only a torn line.
func TestEdgeLogs(t *testing.T) {
	rec := encodeAll(v1All())[0]
	tests := []struct {
		name  string
		data  string
		kinds []error // nil entries are records
	}{
		{"empty", "", nil},
		{"one record", rec + "\n", []error{nil}},
		{"no final newline", rec, []error{ErrTornTail}},
		{"only a newline", "\n", []error{ErrTornTail}},
		{"blank last line", rec + "\n\n", []error{nil, ErrTornTail}},
		{"blank middle line", rec + "\n\n" + encodeAll(v1All())[1] + "\n", []error{nil, ErrCorruptLine, nil}},
		{"zeroed tail sector", rec + "\n" + strings.Repeat("\x00", 512), []error{nil, ErrTornTail}},
		{"windows line end", rec + "\r\n", []error{nil}},
	}
	for _, tt := range tests {
		m := NewMem(tt.name, []byte(tt.data))
		fwd := forward(t, m, 0)
		if len(fwd) != len(tt.kinds) {
			t.Fatalf("%s: %v", tt.name, fwd)
		}
		for i, k := range tt.kinds {
			if (k == nil) != (fwd[i].Kind == nil) || (k != nil && !errors.Is(fwd[i].Kind, k)) {
				t.Errorf("%s: step %d is %v, want %v", tt.name, i, fwd[i], k)
			}
		}
		checkBackward(t, tt.name+" backward", backward(t, m), fwd)
	}
}

// TestCursorAfterEOF: Next keeps returning io.EOF.
func TestCursorAfterEOF(t *testing.T) {
	m := NewMem("m", readFile(t, filepath.Join(goldenDir, "torn-unterminated.jsonl")))
	for _, open := range []func() (Cursor, error){func() (Cursor, error) { return m.Forward(0) }, m.Backward} {
		c, err := open()
		if err != nil {
			t.Fatal(err)
		}
		drain(t, c)
		for range 3 {
			if _, err := c.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("Next after the end: %v", err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOrdinalRules walks the ordinal rules one small log at a time: what a
// forward read reports, and that a backward read agrees (or, for a
// duplicate, reports one too).
func TestOrdinalRules(t *testing.T) {
	all := encodeAll(v1All())
	noOrd := func(i int) string {
		r, _ := DecodeLine([]byte(all[i-1]))
		r.Raw, r.Ordinal = nil, 0
		return string(r.Append(nil))
	}
	v0 := codexShapes
	tests := []struct {
		name  string
		lines []string
		want  []error // forward damage kinds, in order
	}{
		{"clean", all[:5], nil},
		{"starts above 1 (read from a fork point)", all[3:6], nil},
		{"gap", []string{all[0], all[1], all[4]}, []error{ErrOrdinalGap}},
		{"two gaps", []string{all[0], all[2], all[4]}, []error{ErrOrdinalGap, ErrOrdinalGap}},
		{"dup adjacent", []string{all[0], all[1], all[1], all[2]}, []error{ErrOrdinalDuplicate}},
		{"redelivered batch", []string{all[0], all[1], all[2], all[1], all[2], all[3]}, []error{ErrOrdinalDuplicate, ErrOrdinalDuplicate}},
		{"stale line far back", []string{all[0], all[1], all[2], all[3], all[1], all[4]}, []error{ErrOrdinalDuplicate}},
		{"missing ordinal at the tail", []string{all[0], all[1], noOrd(3)}, []error{ErrMissingOrdinal}},
		{"missing ordinals in a row", []string{all[0], noOrd(2), noOrd(3), all[3]}, []error{ErrMissingOrdinal, ErrMissingOrdinal}},
		{"a corrupt line holds one ordinal", []string{all[0], "{garbage", all[2]}, []error{ErrCorruptLine}},
		{"a corrupt line cannot hold two", []string{all[0], "{garbage", all[3]}, []error{ErrCorruptLine, ErrOrdinalGap}},
		{"a crc mismatch holds one ordinal", []string{all[0], strings.Replace(all[1], `"turn_01"`, `"turn_10"`, 1), all[2]}, []error{ErrCRCMismatch}},
		{"a duplicate holds none", []string{all[0], all[1], all[1], all[3]}, []error{ErrOrdinalDuplicate, ErrOrdinalGap}},
		{"head lost its ordinal: read as version 0", []string{noOrd(1), all[1], all[2]}, nil},
		{"version 0", v0, nil},
		{"version 0 with an ordinal line", []string{v0[0], all[4], v0[1]}, nil},
		{"damaged head, then v1", []string{"{garbage", all[1], noOrd(3), all[3]}, []error{ErrCorruptLine, ErrMissingOrdinal}},
	}
	for _, tt := range tests {
		m := NewMem(tt.name, join(tt.lines))
		fwd := forward(t, m, 0)
		got := damage(fwd)
		if len(got) != len(tt.want) {
			t.Errorf("%s: forward damage %v, want %v", tt.name, got, tt.want)
			continue
		}
		for i := range got {
			if !errors.Is(got[i].Kind, tt.want[i]) {
				t.Errorf("%s: finding %d is %v, want %v", tt.name, i, got[i], tt.want[i])
			}
		}
		var prev int64
		for _, s := range records(fwd) {
			if s.Ord != 0 && s.Ord <= prev {
				t.Errorf("%s: ordinal %d yielded after %d", tt.name, s.Ord, prev)
			}
			prev = max(prev, s.Ord)
		}
		bwd := backward(t, m)
		if hasKind(fwd, ErrOrdinalDuplicate) {
			if !hasKind(bwd, ErrOrdinalDuplicate) {
				t.Errorf("%s: backward misses the duplicate: %v", tt.name, bwd)
			}
			continue
		}
		checkBackward(t, tt.name+" backward", bwd, fwd)
	}
}
