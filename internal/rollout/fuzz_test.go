package rollout

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets run on their seed corpus with every `go test`: the
// committed files under testdata/fuzz/<Fuzz...>/ (real lines, golden lines,
// and inputs the fuzzer once crashed on) plus the f.Add calls below. Search
// for new inputs with, for example,
//
//	go test ./internal/rollout -run '^$' -fuzz FuzzCursors -fuzztime 60s

// FuzzDecodeLine: arbitrary bytes never panic; a line that decodes writes
// back exactly as read, and a copy rebuilt from its fields (Raw cleared)
// decodes to the same fields.
func FuzzDecodeLine(f *testing.F) {
	for _, l := range seedLines(f) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := DecodeLine(line)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		if got := r.Append(nil); !bytes.Equal(got, line) {
			t.Fatalf("Append changed the line:\n got %q\nwant %q", got, line)
		}
		c := r.Clone()
		if !bytes.Equal(c.Append(nil), line) {
			t.Fatal("Clone changed the line")
		}
		c.Raw = nil
		rebuilt := c.Append(nil)
		r2, err := DecodeLine(rebuilt)
		if err != nil {
			t.Fatalf("rebuilt line %q does not decode: %v", rebuilt, err)
		}
		if msg := sameFields(&r, &r2); msg != "" {
			t.Fatalf("rebuilt line %q: %s", rebuilt, msg)
		}
		if r.CRCOK() != r2.CRCOK() {
			t.Fatal("rebuilding changed the crc check")
		}
		checkLookup(t, r.Payload)
	})
}

// checkLookup holds the fast Lookup to the validating scanner: for every
// top-level key of a payload object, the value of its first occurrence.
func checkLookup(t *testing.T, payload []byte) {
	t.Helper()
	first := map[string][]byte{}
	_ = eachMember(payload, func(k, v []byte) error {
		key, ok := rawString(k)
		if _, seen := first[key]; ok && !seen {
			first[key] = v
		}
		return nil
	})
	for key, want := range first {
		if got := Lookup(payload, key); !bytes.Equal(got, want) {
			t.Fatalf("Lookup(%q) = %q, want %q", key, got, want)
		}
	}
}

// sameFields compares two records field by field, Raw aside.
func sameFields(a, b *Record) string {
	switch {
	case a.Timestamp != b.Timestamp:
		return fmt.Sprintf("timestamp %q, want %q", b.Timestamp, a.Timestamp)
	case a.Ordinal != b.Ordinal:
		return fmt.Sprintf("ordinal %d, want %d", b.Ordinal, a.Ordinal)
	case a.Type != b.Type:
		return fmt.Sprintf("type %q, want %q", b.Type, a.Type)
	case !bytes.Equal(a.Payload, b.Payload):
		return fmt.Sprintf("payload %q, want %q", b.Payload, a.Payload)
	case a.CRC != b.CRC:
		return fmt.Sprintf("crc %q, want %q", b.CRC, a.CRC)
	case len(a.Extra) != len(b.Extra):
		return fmt.Sprintf("%d extra fields, want %d", len(b.Extra), len(a.Extra))
	}
	for i := range a.Extra {
		if !bytes.Equal(a.Extra[i].Key, b.Extra[i].Key) || !bytes.Equal(a.Extra[i].Value, b.Extra[i].Value) {
			return fmt.Sprintf("extra field %d is %s:%s, want %s:%s", i, b.Extra[i].Key, b.Extra[i].Value, a.Extra[i].Key, a.Extra[i].Value)
		}
	}
	return ""
}

// FuzzCursors: arbitrary bytes read as a log never panic, and a backward read
// is the forward read in opposite order — records and damage alike — unless
// ordinals go back somewhere, which both directions then report.
func FuzzCursors(f *testing.F) {
	for _, l := range seedLines(f) {
		f.Add(l)
	}
	for _, name := range []string{"v1-all.jsonl", "ordinal-duplicate.jsonl", "missing-ordinal.jsonl", "codex-shapes.jsonl"} {
		data := readFile(f, filepath.Join(goldenDir, name))
		f.Add(data)
		f.Add(data[:len(data)*2/3])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := NewMem("fuzz", data)
		fwd, bwd := forward(t, m, 0), backward(t, m)
		checkSteps(t, data, fwd)
		checkSteps(t, data, bwd)
		fdup, bdup := hasKind(fwd, ErrOrdinalDuplicate), hasKind(bwd, ErrOrdinalDuplicate)
		if fdup != bdup {
			t.Fatalf("a duplicate reported forward %v, backward %v", fdup, bdup)
		}
		if !fdup {
			checkBackward(t, "backward", bwd, fwd)
		}
		// Forward from a line start in the middle agrees with the read from
		// the head, except that it cannot see a gap before its first record.
		if starts := lineStarts(data); len(starts) > 1 && !fdup {
			from := starts[len(starts)/2]
			diffSteps(t, fmt.Sprintf("Forward(%d)", from), forward(t, m, from), suffix(fwd, from))
		}
	})
}

// suffix is what a forward read from offset from yields, given the read
// from the head: the steps from there on, without line numbers and without
// the gap before the first record.
func suffix(steps []step, from int64) []step {
	var out []step
	first := int64(-1)
	for _, s := range steps {
		if s.Off >= from && s.Kind == nil && first < 0 {
			first = s.Off
		}
	}
	for _, s := range steps {
		if s.Off < from || (s.Kind != nil && errors.Is(s.Kind, ErrOrdinalGap) && s.Off == first) {
			continue
		}
		s.Line = 0
		out = append(out, s)
	}
	return out
}

// checkSteps holds every yielded record to the bytes it came from.
func checkSteps(t *testing.T, data []byte, steps []step) {
	t.Helper()
	for _, s := range steps {
		if s.Kind != nil || s.Off < 0 || s.Off >= int64(len(data)) {
			if s.Kind == nil {
				t.Fatalf("record at offset %d of %d bytes", s.Off, len(data))
			}
			continue
		}
		if int(s.Off)+s.Size > len(data) || string(data[s.Off:int(s.Off)+s.Size-1]) != s.Raw || data[int(s.Off)+s.Size-1] != '\n' {
			t.Fatalf("record at offset %d is not the line there", s.Off)
		}
	}
}

// seedLines are the small real and golden lines every fuzz target starts from.
func seedLines(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, path := range append(validFiles(t), filepath.Join(goldenDir, "crc-mismatch.jsonl")) {
		for i, l := range splitLines(readFile(t, path)) {
			if len(l) < 600 && i%4 == 0 {
				out = append(out, l)
			}
		}
	}
	return out
}

// writeSeedCorpus commits a few real and golden lines as corpus files, in
// the format `go test` reads from testdata/fuzz.
func writeSeedCorpus(t *testing.T) {
	t.Helper()
	all := encodeAll(v1All())
	tail, _ := DecodeLine([]byte(all[3]))
	tail.Raw, tail.Ordinal = nil, 0
	pick := map[string][]byte{
		// Before the fix, a backward read yielded a last line without an
		// ordinal that a forward read reports (the rollout's head decides now).
		"missing-ordinal-at-tail": append(join(all[:3]), tail.Encode()...),
		"corrupt-line-then-gap":   join([]string{all[0], all[1][:40], all[3], all[4]}),
		"codex-session-meta":      splitLines(readFile(t, smallCodex(t)))[0],
		"codex-function-call":     splitLines(readFile(t, smallCodex(t)))[18],
		"codex-shapes-source":     []byte(codexShapes[0]),
		"codex-custom-tool":       []byte(codexShapes[9]),
		"unknown-envelope":        []byte(unknownShapes()[4]),
		"v1-compacted":            []byte(all[23]),
		"v1-duplicated-tail":      append(join(all[:3]), join(all[1:2])...),
		"v1-missing-ordinal":      readFile(t, filepath.Join(goldenDir, "missing-ordinal.jsonl"))[:3000],
		"torn-unterminated":       readFile(t, filepath.Join(goldenDir, "torn-unterminated.jsonl"))[4500:],
		"escaped-keys-and-crc":    []byte(`{"\u0074imestamp":"2026-11-29T10:00:00.000Z","ordinal":1,"type":"x","payload":{},"crc":"ABCDEF01","extra":[1]}`),
	}
	for _, target := range []string{"FuzzDecodeLine", "FuzzCursors"} {
		dir := filepath.Join(goldenDir, "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range pick {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
