package index

import (
	"context"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestTitleSkipsInjectedContext: a thread's title is its first user message
// that replay would not treat as injected context (replay.IsContextual, the
// legacy-compaction rule) and that is not empty.
func TestTitleSkipsInjectedContext(t *testing.T) {
	skipped := []string{
		"  <ENVIRONMENT_CONTEXT>cwd=/repo</environment_context>",
		"Another language model started to solve this problem and produced a summary of its thinking process.\nit fixed things",
		" \n ",
	}
	for _, s := range skipped[:2] {
		if !replay.IsContextual(s) {
			t.Fatalf("replay does not treat %q as context", s)
		}
	}
	b := rollout.Builder{Now: clock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))}
	recs := []rollout.Record{
		b.Meta(rollout.SessionMeta{ID: "t-title", RolloutID: "r-title", Source: rollout.Source{Kind: "cli"}, Cwd: "/repo"}),
		b.TaskStarted("a"),
	}
	for _, s := range skipped {
		recs = append(recs, b.Message("user", s))
	}
	recs = append(recs, b.Message("user", "fix the login timeout"), b.TaskComplete("a"))
	ix := openDir(t, t.TempDir())
	if err := ix.Apply(context.Background(), "r-title", memEntries(t, rollout.MemOf("r-title", recs))); err != nil {
		t.Fatal(err)
	}
	th, err := ix.Thread(context.Background(), "t-title")
	if err != nil {
		t.Fatal(err)
	}
	if th.Title != "fix the login timeout" {
		t.Fatalf("title %q, want the first message that is not injected context", th.Title)
	}
}
