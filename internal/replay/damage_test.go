package replay

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// damageLine replaces line n (1-based) of data by repl.
func damageLine(t *testing.T, data []byte, n int, repl func([]byte) []byte) []byte {
	t.Helper()
	lines := bytes.SplitAfter(data, []byte("\n"))
	if n < 1 || n > len(lines) {
		t.Fatalf("no line %d", n)
	}
	lines[n-1] = repl(lines[n-1])
	return bytes.Join(lines, nil)
}

func garble(line []byte) []byte { return append([]byte(`{"timestamp":"x","ordin`), '\n') }

func flipCRC(line []byte) []byte {
	i := bytes.LastIndex(line, []byte(`"crc":"`)) + len(`"crc":"`)
	out := bytes.Clone(line)
	if out[i] == '0' {
		out[i] = '1'
	} else {
		out[i] = '0'
	}
	return out
}

func drop([]byte) []byte { return nil }

// TestDamageInsideRegion: corruption inside the dependency region fails both
// paths in strict mode, naming the place, and is skipped with a warning in
// salvage mode.
func TestDamageInsideRegion(t *testing.T) {
	clean := rollout.MemOf("chapter", chapterLog(1)).Bytes()
	cases := []struct {
		name string
		line int
		fn   func([]byte) []byte
		kind error
		want string
	}{
		{"unparsable line", 18, garble, rollout.ErrCorruptLine, "line 18"},
		{"crc mismatch", 16, flipCRC, rollout.ErrCRCMismatch, "ordinal 16"},
		{"ordinal gap", 22, drop, rollout.ErrOrdinalGap, "ordinal 23"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := rollout.NewMem("chapter.jsonl", damageLine(t, clean, tc.line, tc.fn))
			for name, run := range map[string]func(rollout.Log, Options) (*State, error){"fast": Fast, "naive": Naive} {
				_, err := run(log, Options{})
				if !errors.Is(err, ErrCorruptRegion) || !errors.Is(err, tc.kind) {
					t.Fatalf("%s strict: got %v, want %v inside the region", name, err, tc.kind)
				}
				if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "chapter.jsonl") || !strings.Contains(err.Error(), "--salvage") {
					t.Errorf("%s strict: error %q should name the file, %s, and --salvage", name, err, tc.want)
				}
				st, err := run(log, Options{Salvage: true})
				if err != nil {
					t.Fatalf("%s salvage: %v", name, err)
				}
				if !hasWarning(st, WarnSalvaged) {
					t.Errorf("%s salvage: no %s warning in %+v", name, WarnSalvaged, st.Warnings)
				}
			}
			fastSt, _ := Fast(log, Options{Salvage: true})
			if fastSt.Replay.Mode != "fast-fallback" {
				t.Errorf("fast salvage ran as %q, want fast-fallback", fastSt.Replay.Mode)
			}
		})
	}
}

func hasWarning(st *State, code string) bool {
	for _, w := range st.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}

// TestDamageBeforeRegionIsHarmless: corruption in history the resume does not
// depend on is reported by the naive fold and changes nothing.
func TestDamageBeforeRegionIsHarmless(t *testing.T) {
	path := writeHistoryAndTail(t, t.TempDir(), 2000)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), "damaged.jsonl")
	if err := os.WriteFile(damaged, damageLine(t, data, 100, garble), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := rollout.OpenFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	fastSt, err := Fast(log, Options{})
	if err != nil {
		t.Fatalf("fast strict: %v", err)
	}
	naiveSt, err := Naive(log, Options{})
	if err != nil {
		t.Fatalf("naive strict: %v", err)
	}
	if naiveSt.Replay.CorruptLines != 1 || len(naiveSt.Replay.Corruption) != 1 || naiveSt.Replay.Corruption[0].InRegion {
		t.Errorf("naive should report one corrupt line outside the region: %+v", naiveSt.Replay)
	}
	if naiveSt.Replay.Corruption[0].Line != 100 {
		t.Errorf("corruption reported at line %d, want 100", naiveSt.Replay.Corruption[0].Line)
	}
	if diff := stateDiff(naiveSt, fastSt); diff != "" {
		t.Fatal(diff)
	}
}

// TestTornTailIsHarmless: a last line cut short is ignored by both paths.
func TestTornTailIsHarmless(t *testing.T) {
	clean := rollout.MemOf("chapter", chapterLog(1)).Bytes()
	want, err := Naive(rollout.NewMem("clean", clean), Options{})
	if err != nil {
		t.Fatal(err)
	}
	torn := append(bytes.Clone(clean), []byte(`{"timestamp":"2026-11-29T10:00:26.000Z","ordinal":26,"type":"event_msg","payl`)...)
	log := rollout.NewMem("torn", torn)
	for name, run := range map[string]func(rollout.Log, Options) (*State, error){"fast": Fast, "naive": Naive} {
		st, err := run(log, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !st.Replay.TornTail || st.Replay.CorruptLines != 0 {
			t.Errorf("%s: torn tail not reported as such: %+v", name, st.Replay)
		}
		if diff := stateDiff(want, st); diff != "" {
			t.Errorf("%s: torn tail changed the state: %s", name, diff)
		}
	}
}
