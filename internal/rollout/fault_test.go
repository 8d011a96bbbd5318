package rollout

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// TestCutEverywhere cuts real bytes: the small Codex rollout at every
// offset, the first 2 KB and last 1 KB of a longer one, and v1-all (ordinals and
// crcs) at every offset of its last line and every 7th before. No panic,
// every line before the cut comes back intact, and the cut line is a torn
// tail — never mid-log corruption — reading either way.
func TestCutEverywhere(t *testing.T) {
	small := smallCodex(t)
	long := codexPath(t, "019c8bfe-ec25-79e0-97d7-bda6a9c575ff")
	v1 := filepath.Join(goldenDir, "v1-all.jsonl")
	n, v1n := len(readFile(t, long)), len(readFile(t, v1))
	lastLine := int(lineStarts(readFile(t, v1))[len(v1All())-1])
	inputs := []struct {
		path    string
		offsets []int
	}{
		{small, span(0, len(readFile(t, small))+1, 1)},
		{long, append(span(0, 2048, 1), span(n-1024, n+1, 1)...)},
		{v1, append(span(0, lastLine, 7), span(lastLine, v1n+1, 1)...)},
	}
	for _, in := range inputs {
		data := readFile(t, in.path)
		starts := append(lineStarts(data), int64(len(data)))
		for _, cut := range in.offsets {
			checkCut(t, fmt.Sprintf("%s cut at %d", filepath.Base(in.path), cut), data[:cut:cut], starts)
		}
	}
}

func span(from, to, step int) []int {
	var out []int
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

// checkCut checks a prefix of a valid log; starts are the line starts of the
// whole log, with its length last.
func checkCut(t *testing.T, name string, cut []byte, starts []int64) {
	t.Helper()
	m := NewMem(name, cut)
	fwd := forward(t, m, 0)
	whole := 0 // lines that end before the cut
	for whole+1 < len(starts) && starts[whole+1] <= int64(len(cut)) {
		whole++
	}
	want := whole
	if starts[whole] < int64(len(cut)) {
		want++ // the torn line
	}
	if len(fwd) != want {
		t.Fatalf("%s: %d steps, want %d: %v", name, len(fwd), want, fwd)
	}
	for i, s := range fwd {
		if i < whole {
			if s.Kind != nil || s.Off != starts[i] || s.Raw != string(cut[starts[i]:starts[i+1]-1]) {
				t.Fatalf("%s: line %d is %v", name, i+1, s)
			}
			continue
		}
		if !errors.Is(s.Kind, ErrTornTail) || s.Off != starts[i] || s.Line != i+1 {
			t.Fatalf("%s: the cut line is %v, want a torn tail at offset %d", name, s, starts[i])
		}
	}
	checkBackward(t, name+" backward", backward(t, m), fwd)
}

// TestFlipPayloadByte changes one payload letter of each line of v1 files:
// that line, and nothing else, is a crc mismatch (or, when the letter was
// part of a literal, a corrupt line), reading either way.
func TestFlipPayloadByte(t *testing.T) {
	inputs := map[string][]byte{
		"v1-all": readFile(t, filepath.Join(goldenDir, "v1-all.jsonl")),
		// A real Codex rollout as import writes it: ordinals and crcs added.
		"codex-reenveloped": reenvelope(t, readFile(t, smallCodex(t))),
	}
	for name, data := range inputs {
		lines := splitLines(data)
		clean := forward(t, NewMem(name, data), 0)
		for li, line := range lines {
			r, err := DecodeLine(line)
			if err != nil {
				t.Fatal(err)
			}
			pstart := len(line) - len(r.Payload) - len(`,"crc":"00000000"}`)
			var letters []int
			for i := pstart; i < pstart+len(r.Payload); i++ {
				if c := line[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
					letters = append(letters, i)
				}
			}
			// Every letter of the first lines, a sample of the rest, so it stays fast.
			step := max(1, len(letters)/8)
			for k := 0; k < len(letters); k += step {
				i := letters[k]
				mut := slices.Clone(data)
				pos := int(clean[li].Off) + i
				mut[pos] ^= 0x20 // a letter's case: the line stays one line
				checkFlip(t, fmt.Sprintf("%s line %d byte %d", name, li+1, i), mut, clean, li)
			}
		}
	}
}

func checkFlip(t *testing.T, name string, mut []byte, clean []step, li int) {
	t.Helper()
	m := NewMem(name, mut)
	fwd := forward(t, m, 0)
	var want []step
	_, decodeErr := DecodeLine(splitLines(mut)[li])
	for i, s := range clean {
		if i != li {
			want = append(want, s)
		} else {
			kind := ErrCRCMismatch
			ord := s.Ord
			if decodeErr != nil {
				kind, ord = ErrCorruptLine, 0
				if li == len(clean)-1 {
					kind = ErrTornTail
				}
			}
			want = append(want, step{Off: s.Off, Line: s.Line, Ord: ord, Kind: kind})
		}
	}
	diffSteps(t, name, fwd, want)
	checkBackward(t, name+" backward", backward(t, m), fwd)
}

// TestDropLine removes each line of a v1 file in turn: the next line reports
// the ordinal gap, at its offset, with its ordinal.
func TestDropLine(t *testing.T) {
	data := reenvelope(t, readFile(t, codexPath(t, "019c8bfe-ec25-79e0-97d7-bda6a9c575ff")))
	lines := splitLines(data)
	for i := 1; i < len(lines)-1; i++ {
		var kept [][]byte
		kept = append(kept, lines[:i]...)
		kept = append(kept, lines[i+1:]...)
		var strs []string
		for _, l := range kept {
			strs = append(strs, string(l))
		}
		mut := join(strs)
		m := NewMem("dropped", mut)
		fwd := forward(t, m, 0)
		d := damage(fwd)
		off := lineStarts(mut)[i]
		if len(d) != 1 || !errors.Is(d[0].Kind, ErrOrdinalGap) || d[0].Line != i+1 || d[0].Off != off || d[0].Ord != int64(i+2) {
			t.Fatalf("line %d dropped: damage %v, want a gap at line %d offset %d ordinal %d", i+1, d, i+1, off, i+2)
		}
		if len(records(fwd)) != len(lines)-1 {
			t.Fatalf("line %d dropped: %d records", i+1, len(records(fwd)))
		}
		checkBackward(t, "backward", backward(t, m), fwd)
	}
}

// reenvelope turns a version-0 rollout into v1 the way import does.
func reenvelope(t *testing.T, data []byte) []byte {
	t.Helper()
	var out []byte
	for i, l := range splitLines(data) {
		r, err := DecodeLine(l)
		if err != nil {
			t.Fatal(err)
		}
		c := r.Reenvelope(int64(i + 1))
		out = append(c.Append(out), '\n')
	}
	return out
}
