package rollout

import (
	"errors"
	"path/filepath"
	"testing"
)

// finding is one damage report expected from a golden file: its kind, the
// line it names (in the damaged file) and the ordinal found there.
type finding struct {
	kind    error
	line    int
	ordinal int64
}

// TestDamagedGoldens reads every damaged golden file both ways and checks
// the exact classification: the sentinel, the line, its offset and ordinal.
// Backward cursors do not know line numbers (Line is 0) but must name the
// same offsets, except for a duplicate, which a backward read meets from
// the other side (see backwardOrdinals).
func TestDamagedGoldens(t *testing.T) {
	n := len(v1All())
	tests := []struct {
		file    string
		want    []finding
		records int
		// backDup is the line a backward read reports as the duplicate.
		backDup int
	}{
		{file: "torn-unterminated.jsonl", records: n - 1, want: []finding{{ErrTornTail, n, 0}}},
		{file: "torn-unparsable.jsonl", records: n - 1, want: []finding{{ErrTornTail, n, 0}}},
		// A damaged line accounts for the ordinal it held: no gap after it.
		{file: "corrupt-middle.jsonl", records: n - 1, want: []finding{{ErrCorruptLine, dmgCorruptLine, 0}}},
		{file: "crc-mismatch.jsonl", records: n - 1, want: []finding{{ErrCRCMismatch, dmgCRCLine, dmgCRCLine}}},
		{file: "ordinal-gap.jsonl", records: n - 1, want: []finding{
			{ErrOrdinalGap, dmgDroppedLine, dmgDroppedLine + 1}}},
		{file: "ordinal-duplicate.jsonl", records: n, backDup: dmgDupLine, want: []finding{
			{ErrOrdinalDuplicate, dmgDupLine + 1, dmgDupLine}}},
		{file: "missing-ordinal.jsonl", records: n - 1, want: []finding{{ErrMissingOrdinal, dmgNoOrdLine, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(goldenDir, tt.file)
			starts := lineStarts(readFile(t, path))
			l := openFile(t, path)
			fwd := forward(t, l, 0)
			got := damage(fwd)
			if len(got) != len(tt.want) {
				t.Fatalf("forward damage %v, want %d findings", got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if !errors.Is(g.Kind, w.kind) || g.Line != w.line || g.Off != starts[w.line-1] || g.Ord != w.ordinal {
					t.Errorf("forward finding %d: %v, want %v line %d offset %d ordinal %d", i, g, w.kind, w.line, starts[w.line-1], w.ordinal)
				}
			}
			if len(records(fwd)) != tt.records {
				t.Errorf("forward: %d records, want %d", len(records(fwd)), tt.records)
			}
			bwd := backward(t, l)
			if tt.backDup == 0 {
				// Same findings, same records in opposite order.
				checkBackward(t, "backward", bwd, fwd)
				return
			}
			bd := damage(bwd)
			if len(bd) != 1 || !errors.Is(bd[0].Kind, ErrOrdinalDuplicate) || bd[0].Off != starts[tt.backDup-1] || bd[0].Line != 0 {
				t.Fatalf("backward damage %v, want a duplicate at offset %d", bd, starts[tt.backDup-1])
			}
			// The copies are identical: the same bytes come back in opposite order.
			fr, br := records(fwd), records(bwd)
			if len(fr) != len(br) {
				t.Fatalf("backward: %d records, forward %d", len(br), len(fr))
			}
			for i := range fr {
				if fr[i].Raw != br[len(br)-1-i].Raw {
					t.Fatalf("record %d differs backward", i)
				}
			}
		})
	}
}

// TestCorruptionError checks what callers read off a damage report.
func TestCorruptionError(t *testing.T) {
	tests := []struct {
		err     CorruptionError
		torn    bool
		skipped bool
		text    string
	}{
		{CorruptionError{Kind: ErrTornTail, Name: "r.jsonl", Line: 26, Offset: 9000, Detail: "40 bytes without a final newline"},
			true, true, "r.jsonl line 26 offset 9000: rollout: torn tail: 40 bytes without a final newline"},
		{CorruptionError{Kind: ErrOrdinalGap, Name: "r.jsonl", Offset: 512, Ordinal: 13},
			false, false, "r.jsonl offset 512 ordinal 13: rollout: ordinal gap"},
		{CorruptionError{Kind: ErrCRCMismatch, Name: "r.jsonl", Line: 8, Offset: 100, Ordinal: 8},
			false, true, "r.jsonl line 8 offset 100 ordinal 8: rollout: crc mismatch"},
		{CorruptionError{Kind: ErrOrdinalDuplicate, Name: "r", Line: 1, Ordinal: 4}, false, true, "r line 1 offset 0 ordinal 4: rollout: duplicate ordinal"},
		{CorruptionError{Kind: ErrMissingOrdinal, Name: "r", Line: 2, Offset: 7}, false, true, "r line 2 offset 7: rollout: missing ordinal"},
		{CorruptionError{Kind: ErrCorruptLine, Name: "r", Line: 3, Offset: 9}, false, true, "r line 3 offset 9: rollout: corrupt line"},
	}
	for _, tt := range tests {
		e := tt.err
		if e.Torn() != tt.torn || e.Skipped() != tt.skipped || e.Error() != tt.text {
			t.Errorf("%v: Torn %v Skipped %v, want %v %v %q", &e, e.Torn(), e.Skipped(), tt.torn, tt.skipped, tt.text)
		}
		var err error = &e
		if !errors.Is(err, tt.err.Kind) {
			t.Errorf("%v does not wrap its kind", err)
		}
	}
}

// TestSkippedMatchesCursor holds Skipped to its word: a report's line
// yields a record exactly when Skipped is false — the record right after
// the report reading forward, the one right before it reading backward (a
// gap names the later record).
func TestSkippedMatchesCursor(t *testing.T) {
	for name, path := range goldenPaths(t) {
		l := openFile(t, path)
		for _, dir := range []string{"forward", "backward"} {
			var steps []step
			if dir == "forward" {
				steps = forward(t, l, 0)
			} else {
				steps = reversed(backward(t, l))
			}
			// In file order, a report that keeps its record sits right before it.
			for i, s := range steps {
				if s.Kind == nil {
					continue
				}
				ce := CorruptionError{Kind: s.Kind}
				kept := i+1 < len(steps) && steps[i+1].Kind == nil && steps[i+1].Off == s.Off
				if kept == ce.Skipped() {
					t.Errorf("%s %s: %v: Skipped %v, record returned %v", name, dir, s, ce.Skipped(), kept)
				}
			}
		}
	}
}
