package index

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// TestVerifyIndex: a fresh index verifies clean; a changed row, a mirror
// file cut short and a missing one are each found.
func TestVerifyIndex(t *testing.T) {
	ctx := context.Background()
	dir := genDataDir(t, 3, 1, 200)
	writeMirrorFile(t, dir, "rollout-M", mustRead(t, examplesDir+"/mid-turn-compaction.jsonl"))
	ix := openDir(t, dir)
	catchUp(t, ix)
	rep, err := VerifyIndex(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 || len(rep.Rollouts) == 0 {
		t.Fatalf("fresh index: %d rollouts, problems %v", len(rep.Rollouts), rep.Problems)
	}

	ix.db.ExecContext(ctx, "UPDATE items SET excerpt = 'tampered' WHERE rollout_id = 'rollout-1' AND ordinal = (SELECT min(ordinal) FROM items WHERE rollout_id = 'rollout-1')")
	ix.db.ExecContext(ctx, "UPDATE threads SET title = 'tampered' WHERE thread_id = 'thread-2'")
	es := entriesOf(t, datadir.MirrorPath(dir, "rollout-3"))
	os.Truncate(datadir.MirrorPath(dir, "rollout-3"), es[len(es)-10].Offset)
	os.Remove(datadir.MirrorPath(dir, "rollout-M"))
	rep, err = VerifyIndex(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var all []string
	for _, p := range rep.Problems {
		kinds[p.Kind]++
		all = append(all, p.Kind+" "+p.Rollout+" "+p.Detail)
	}
	text := strings.Join(all, "\n")
	if strings.Contains(text, "rollout-M,") || strings.Contains(text, "(rollout-3,") {
		t.Errorf("rows of rollouts with a reported problem are listed again:\n%s", text)
	}
	for _, want := range []string{"items: row (rollout-1, ", "threads: row (thread-2,", "index_ahead rollout-3", "no_mirror_file rollout-M"} {
		if !strings.Contains(text, want) {
			t.Errorf("problems do not mention %q:\n%s", want, text)
		}
	}
}
