package rollout

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden rollouts and seed corpus under testdata")

// step is one result of a cursor: a record, or a damage report.
type step struct {
	Off  int64
	Line int
	Ord  int64
	Kind error  // nil for a record
	Raw  string // the record's line without '\n'; "" for damage
	Size int
}

func (s step) String() string {
	if s.Kind == nil {
		return fmt.Sprintf("record line %d offset %d ordinal %d size %d", s.Line, s.Off, s.Ord, s.Size)
	}
	return fmt.Sprintf("%v line %d offset %d ordinal %d", s.Kind, s.Line, s.Off, s.Ord)
}

// drain reads a cursor to its end. A reader error other than damage fails
// the test; a cursor that never ends is caught by the bound.
func drain(t testing.TB, c Cursor) []step {
	t.Helper()
	defer c.Close()
	var out []step
	for range 1 << 20 {
		e, err := c.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			out = append(out, step{Off: ce.Offset, Line: ce.Line, Ord: ce.Ordinal, Kind: ce.Kind})
			continue
		}
		if err != nil {
			t.Fatalf("cursor: %v", err)
		}
		if e.Size != len(e.Raw)+1 {
			t.Fatalf("entry at offset %d: size %d for a %d-byte line", e.Offset, e.Size, len(e.Raw))
		}
		out = append(out, step{Off: e.Offset, Line: e.Line, Ord: e.Ordinal, Raw: string(e.Raw), Size: e.Size})
	}
	t.Fatal("cursor did not reach the end")
	return nil
}

func forward(t testing.TB, l Log, from int64) []step {
	t.Helper()
	c, err := l.Forward(from)
	if err != nil {
		t.Fatalf("%s: Forward(%d): %v", l.Name(), from, err)
	}
	return drain(t, c)
}

func backward(t testing.TB, l Log) []step {
	t.Helper()
	c, err := l.Backward()
	if err != nil {
		t.Fatalf("%s: Backward: %v", l.Name(), err)
	}
	return drain(t, c)
}

// reversed is what a backward read of the same log yields: the steps in
// opposite order, without line numbers.
func reversed(steps []step) []step {
	out := make([]step, len(steps))
	for i, s := range steps {
		s.Line = 0
		out[len(steps)-1-i] = s
	}
	return out
}

func records(steps []step) []step {
	var out []step
	for _, s := range steps {
		if s.Kind == nil {
			out = append(out, s)
		}
	}
	return out
}

func damage(steps []step) []step {
	var out []step
	for _, s := range steps {
		if s.Kind != nil {
			out = append(out, s)
		}
	}
	return out
}

func hasKind(steps []step, kind error) bool {
	for _, s := range steps {
		if s.Kind != nil && errors.Is(s.Kind, kind) {
			return true
		}
	}
	return false
}

// checkBackward holds a backward read to the forward read of the same log:
// the same records in opposite order, and the same damage (a backward read
// reports a gap after the damaged lines before it, not before them).
func checkBackward(t testing.TB, what string, bwd, fwd []step) {
	t.Helper()
	diffSteps(t, what+" records", records(bwd), reversed(records(fwd)))
	diffSteps(t, what+" damage", sortedDamage(bwd), sortedDamage(reversed(fwd)))
}

func sortedDamage(steps []step) []step {
	d := damage(steps)
	for i := range d {
		d[i].Line = 0
	}
	slices.SortStableFunc(d, func(a, b step) int {
		return cmp.Or(cmp.Compare(a.Off, b.Off), cmp.Compare(a.Kind.Error(), b.Kind.Error()), cmp.Compare(a.Ord, b.Ord))
	})
	return d
}

// diffSteps fails with the first difference between two step lists.
func diffSteps(t testing.TB, what string, got, want []step) {
	t.Helper()
	for i := 0; i < len(got) || i < len(want); i++ {
		switch {
		case i >= len(got):
			t.Fatalf("%s: step %d missing, want %v", what, i, want[i])
		case i >= len(want):
			t.Fatalf("%s: extra step %d: %v", what, i, got[i])
		case !sameStep(got[i], want[i]):
			t.Fatalf("%s: step %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func sameStep(a, b step) bool {
	return a.Off == b.Off && a.Line == b.Line && a.Ord == b.Ord && a.Raw == b.Raw && a.Size == b.Size &&
		(a.Kind == nil) == (b.Kind == nil) && (a.Kind == nil || errors.Is(a.Kind, b.Kind))
}

// lineStarts is the naive reference: the offset of every line of data.
func lineStarts(data []byte) []int64 {
	var out []int64
	for off := 0; off < len(data); {
		out = append(out, int64(off))
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			break
		}
		off += i + 1
	}
	return out
}

// splitLines returns the lines of data without their '\n'; a final
// unterminated fragment is included.
func splitLines(data []byte) [][]byte {
	lines := bytes.SplitAfter(data, []byte{'\n'})
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte{'\n'})
	}
	return lines
}

const codexGlob = "../../testdata/codex-real/sessions/*/*/*/*.jsonl"

// codexFiles are the six real Codex Desktop rollouts (version 0).
func codexFiles(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(codexGlob)
	if err != nil || len(paths) != 6 {
		t.Fatalf("want the six Codex sessions, found %d (%v)", len(paths), err)
	}
	return paths
}

// smallCodex is the shortest real rollout (19 lines, a call in flight at the tail).
func smallCodex(t testing.TB) string {
	t.Helper()
	return codexPath(t, "019c8a70-dda7-7f33-98ea-f30553347322")
}

func codexPath(t testing.TB, id string) string {
	t.Helper()
	for _, p := range codexFiles(t) {
		if strings.Contains(filepath.Base(p), id) {
			return p
		}
	}
	t.Fatalf("no Codex rollout %s", id)
	return ""
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openFile(t testing.TB, path string) *File {
	t.Helper()
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeTemp writes data to a new file in a test directory.
func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
