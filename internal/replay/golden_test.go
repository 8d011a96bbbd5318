package replay

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/rollout"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the example rollouts and the golden replay results")

const examplesDir = "../../testdata/examples"

// examples are the Logbook rollouts written to testdata/examples.
var examples = map[string]func() []rollout.Record{
	"chapter-rollback-1":  func() []rollout.Record { return chapterLog(1) },
	"chapter-rollback-2":  func() []rollout.Record { return chapterLog(2) },
	"chapter-rollback-3":  func() []rollout.Record { return chapterLog(3) },
	"mid-turn-compaction": midTurnLog,
	"paginated-migrate":   paginatedLog,
}

// TestExamplesUpToDate keeps the committed example rollouts equal to what the
// builders above write.
func TestExamplesUpToDate(t *testing.T) {
	for name, build := range examples {
		want := rollout.MemOf(name, build()).Bytes()
		path := filepath.Join(examplesDir, name+".jsonl")
		if *rewrite {
			if err := os.MkdirAll(examplesDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/replay -run TestExamplesUpToDate -rewrite)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its builder; rerun with -rewrite and review the diff", path)
		}
	}
}

// goldenInputs lists every rollout with a golden result.
func goldenInputs(t *testing.T) map[string]string {
	t.Helper()
	in := map[string]string{}
	for name := range examples {
		in[name] = filepath.Join(examplesDir, name+".jsonl")
	}
	codex, err := filepath.Glob("../../testdata/codex-real/sessions/*/*/*/*.jsonl")
	if err != nil || len(codex) != 6 {
		t.Fatalf("want the six Codex sessions, found %d (%v)", len(codex), err)
	}
	for _, p := range codex {
		base := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		in["codex-"+base[len(base)-36:]] = p
	}
	return in
}

// TestGolden replays every input both ways: the two states must be equal, and
// the fast one (the default of `coordinator replay --json`) must equal the
// reviewed golden file.
func TestGolden(t *testing.T) {
	for name, path := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			log, err := rollout.OpenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fastSt, err := Fast(log, Options{})
			if err != nil {
				t.Fatal(err)
			}
			naiveSt, err := Naive(log, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := stateDiff(naiveSt, fastSt); diff != "" {
				t.Fatalf("fast and naive replays differ: %s", diff)
			}
			got, err := fastSt.MarshalIndent()
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", name+".json")
			if *rewrite {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -rewrite, then review)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("replay of %s differs from %s; rerun with -rewrite and review the diff", path, golden)
			}
		})
	}
}

// stateDiff compares two states, replay statistics aside; "" when equal.
func stateDiff(a, b *State) string {
	ca, cb := *a, *b
	ca.Replay, cb.Replay = Stats{}, Stats{}
	ja, err1 := ca.MarshalIndent()
	jb, err2 := cb.MarshalIndent()
	if err1 != nil || err2 != nil {
		return "cannot marshal"
	}
	if bytes.Equal(ja, jb) {
		return ""
	}
	la, lb := strings.Split(string(ja), "\n"), strings.Split(string(jb), "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			lo := max(0, i-3)
			return "first difference at line " + strconv.Itoa(i+1) + ":\nnaive: " + strings.Join(la[lo:min(len(la), i+3)], "\n       ") +
				"\nfast:  " + strings.Join(lb[lo:min(len(lb), i+3)], "\n       ")
		}
	}
	return "lengths differ"
}

// TestRecordsReadCountsEachRecordOnce: records_read is the number of
// distinct records a replay read, however many passes it made: the naive
// fold reads every record of the file once, the fast path never more.
func TestRecordsReadCountsEachRecordOnce(t *testing.T) {
	for name, path := range goldenInputs(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		records := bytes.Count(data, []byte("\n"))
		log, err := rollout.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		naive, err := Naive(log, Options{})
		if err != nil {
			t.Fatal(err)
		}
		fast, err := Fast(log, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if naive.Replay.RecordsRead != records || fast.Replay.RecordsRead > records || fast.Replay.RecordsRead < 1 {
			t.Errorf("%s: %d records; naive read %d, fast %d", name, records, naive.Replay.RecordsRead, fast.Replay.RecordsRead)
		}
	}
}
