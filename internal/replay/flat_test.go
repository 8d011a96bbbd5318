package replay

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// writeHistoryAndTail writes history generated records, then the same tail of
// one checkpointed turn, to a file; it returns the path.
func writeHistoryAndTail(t testing.TB, dir string, history int) string {
	t.Helper()
	path := filepath.Join(dir, "flat-"+strconv.Itoa(history)+".jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	g := gen.New(gen.Config{Seed: 42, Records: history, CompactEvery: 500})
	var buf []byte
	for i := 0; i < history; i++ {
		r := g.Next()
		buf = append(r.Append(buf[:0]), '\n')
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range flatTail(int64(history)+1, g.OpenCalls()) {
		buf = append(r.Append(buf[:0]), '\n')
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// flatTail is one turn compacted mid-way: the resume dependency region.
func flatTail(first int64, open []rollout.OpenCall) []rollout.Record {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	b := &rollout.Builder{Next: first, Now: func() time.Time { return t0 }}
	w := 1000
	tc := rollout.TurnContext{TurnID: "tail", Model: "model-large", ApprovalPolicy: "on-request", Cwd: "/repo"}
	return []rollout.Record{
		b.TaskStarted("tail"),
		b.UserMessage("continue"),
		b.TurnContext(tc),
		b.Message("user", "continue"),
		b.Call("tail-call", "shell", `{"cmd":"make test"}`, "k-tail"),
		b.Output("tail-call", "ok"),
		b.Compacted(rollout.Compacted{Message: "summary", ReplacementHistory: []json.RawMessage{rollout.MessageItem("user", "continue")}, WindowNumber: &w, OpenCalls: &open}),
		b.World(true, map[string]string{"cwd": "/repo"}),
		b.TurnContext(tc),
		b.Message("assistant", "done"),
		b.TokenCount(5000, 500),
		b.TaskComplete("tail"),
	}
}

// TestFastPathIsFlat: for the same tail, the fast path reads exactly as many
// records whatever the history before the last checkpoint.
func TestFastPathIsFlat(t *testing.T) {
	sizes := []int{10_000, 100_000, 1_000_000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	dir := t.TempDir()
	want := -1
	for _, n := range sizes {
		path := writeHistoryAndTail(t, dir, n)
		log, err := rollout.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		st, err := Fast(log, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("history %9d records: fast path read %d records in %v", n, st.Replay.RecordsRead, time.Since(start))
		if want < 0 {
			want = st.Replay.RecordsRead
		} else if st.Replay.RecordsRead != want {
			t.Errorf("history %d: fast path read %d records, %d with less history: not flat", n, st.Replay.RecordsRead, want)
		}
		if n <= 100_000 {
			naiveSt, err := Naive(log, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := stateDiff(naiveSt, st); diff != "" {
				t.Fatalf("history %d: %s", n, diff)
			}
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}
