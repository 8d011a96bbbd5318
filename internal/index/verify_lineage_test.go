package index

import (
	"context"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// TestVerifyLineage: on a generated tree the index's lineage and ledger
// equal the full scan's, also while a mirror file holds records past the
// watermark (a serving index lags); a delivery judged wrongly, or a
// thread's count, is reported as a divergence.
func TestVerifyLineage(t *testing.T) {
	ctx := context.Background()
	g := newAgentGen(7)
	g.tree(3)
	dir := t.TempDir()
	g.write(t, dir)
	rebuild(t, dir)
	ps, err := VerifyLineage(ctx, dir)
	if err != nil || len(ps) != 0 {
		t.Fatalf("a fresh index: %v %+v", err, ps)
	}
	// Records appended to the mirror and not indexed yet are not compared.
	r := g.rollouts[0]
	r.add(r.b.TaskStarted("late"), r.b.UserMessage("late"))
	writeRollout(t, dir, r.id, r.recs)
	if ps, err := VerifyLineage(ctx, dir); err != nil || len(ps) != 0 {
		t.Fatalf("an index that lags: %v %+v", err, ps)
	}
	ix, err := OpenFile(ctx, datadir.IndexPath(dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.db.ExecContext(ctx, `UPDATE deliveries SET state = 'confirmed' WHERE (msg_id, to_thread) IN
		(SELECT msg_id, to_thread FROM deliveries WHERE state <> 'confirmed' LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ps, err = VerifyLineage(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, p := range ps {
		kinds[p.Kind] = true
	}
	if !kinds["ledger_differs"] {
		t.Errorf("a delivery judged wrongly: %+v", ps)
	}
	// A thread's count.
	ix, err = OpenFile(ctx, datadir.IndexPath(dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var id, node string
	if err := ix.db.QueryRowContext(ctx, `SELECT thread_id, node FROM threads ORDER BY thread_id LIMIT 1`).Scan(&id, &node); err != nil {
		t.Fatal(err)
	}
	f, err := decodeNode(id, node)
	if err != nil {
		t.Fatal(err)
	}
	f.UnknownCalls++
	if _, err := ix.db.ExecContext(ctx, `UPDATE threads SET node = ? WHERE thread_id = ?`, encodeNode(f), id); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	if ps, err = VerifyLineage(ctx, dir); err != nil {
		t.Fatal(err)
	}
	kinds = map[string]bool{}
	for _, p := range ps {
		kinds[p.Kind] = true
		if !strings.Contains(p.Detail, "full scan") {
			t.Errorf("%s: %s does not say where", p.Kind, p.Detail)
		}
	}
	if !kinds["lineage_differs"] {
		t.Errorf("a wrong count: %+v", ps)
	}
}
