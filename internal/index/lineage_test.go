package index

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// TestEdgesAndMessages: spawn edges from both sides (parent_thread_id, the
// Codex source object, thread_spawned — also for a child that never wrote a
// line), fork edges, every message with its direction, a receipt a rollback
// took out of effect, and a reverted thread's current rollout.
func TestEdgesAndMessages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lineage(t, dir)
	ix := openDir(t, dir)
	catchUp(t, ix)

	rows := func(q string) []string {
		t.Helper()
		rs, err := dumpRows(ctx, ix.db, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, strings.Join(r, " "))
		}
		return out
	}
	wantEdges := []string{
		"spawn t-parent t-child parent_thread_id r-child 1",
		"fork t-parent t-fork forked_from_id r-fork 1",
		"spawn t-parent t-child thread_spawned r-parent 1",
		"spawn t-parent t-never-wrote thread_spawned r-parent 1",
		"spawn t-parent t-codexsub source.subagent.thread_spawn t-codexsub 1",
	}
	if got := rows(`SELECT kind, parent_thread_id, child_thread_id, evidence, rollout_id, in_effect FROM edges ORDER BY rollout_id, ordinal`); !reflect.DeepEqual(got, wantEdges) {
		t.Errorf("edges:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantEdges, "\n"))
	}
	wantMsgs := []string{
		"r-child t-child received m-task k-task t-parent t-child task  1",
		"r-child t-child sent m-result k-result t-child t-parent result m-task 1",
		"r-parent t-parent sent m-task k-task t-parent t-child task  1",
		"r-parent t-parent received m-result k-result t-child t-parent result m-task 1",
		"r-parent t-parent received m-late k-late t-child t-parent note  0",
	}
	if got := rows(`SELECT rollout_id, thread_id, direction, msg_id, idempotency_key, from_thread, to_thread, kind, in_reply_to, in_effect
		FROM messages ORDER BY rollout_id, ordinal`); !reflect.DeepEqual(got, wantMsgs) {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantMsgs, "\n"))
	}
	wantTurns := []string{"p1 completed 1 0", "p2 rolled_back 1 1"}
	if got := rows(`SELECT turn_id, status, user, rolled_back FROM turns WHERE rollout_id = 'r-parent' ORDER BY seq`); !reflect.DeepEqual(got, wantTurns) {
		t.Errorf("parent turns %v, want %v", got, wantTurns)
	}

	rev, err := ix.Thread(ctx, "t-rev")
	if err != nil {
		t.Fatal(err)
	}
	if rev.CurrentRolloutID != "r-rev-2" || rev.Rollouts != 2 || rev.Model != "model-mini" || rev.Status != "interrupted" || rev.Title != "First attempt" {
		t.Errorf("reverted thread: %+v", rev)
	}
	child, err := ix.Thread(ctx, "t-chi")
	if err != nil {
		t.Fatalf("prefix lookup: %v", err)
	}
	if child.ID != "t-child" || child.ParentThreadID != "t-parent" || child.AgentRole != "worker" || child.Status != "completed" {
		t.Errorf("child: %+v", child)
	}
	if _, err := ix.Thread(ctx, "t-"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	if _, err := ix.Thread(ctx, "nope"); err == nil {
		t.Error("unknown thread found")
	}
}
