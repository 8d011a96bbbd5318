package index

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/tree"
)

// regularTree writes a data dir's mirror holding a regular agent tree:
// fanout children per thread down to depth, turns turns each, a task down
// and a result up every edge (sent, received, answered). It returns the
// number of threads and the id of the first child of the root (a subtree of
// (fanout^depth-1)/(fanout-1) threads).
func regularTree(t testing.TB, dir string, fanout, depth, turns int) (int, string) {
	t.Helper()
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	n := 0
	var write func(id, parent, task string, level int)
	write = func(id, parent, task string, level int) {
		n++
		b := rollout.Builder{Now: func() time.Time { start = start.Add(time.Millisecond); return start }}
		rid := "r" + id
		recs := []rollout.Record{b.Meta(rollout.SessionMeta{ID: id, RolloutID: rid, ParentThreadID: parent, Cwd: "/work",
			Source: rollout.Source{Kind: "sim"}})}
		var kids []string
		if level < depth {
			for i := 0; i < fanout; i++ {
				kids = append(kids, fmt.Sprintf("%s-%d", id, i))
			}
		}
		for turn := 1; turn <= turns; turn++ {
			tid := fmt.Sprintf("%s-t%d", id, turn)
			recs = append(recs, b.TaskStarted(tid))
			switch {
			case turn == 1 && task != "":
				recs = append(recs, b.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: task, IdempotencyKey: "k" + task,
					FromThread: parent, Kind: rollout.MsgTask}))
			default:
				recs = append(recs, b.UserMessage("go on "+tid))
			}
			if turn == 1 {
				for _, k := range kids {
					recs = append(recs, b.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: k, AgentRole: "worker"}),
						b.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: "m" + k, IdempotencyKey: "km" + k, ToThread: k,
							Kind: rollout.MsgTask}))
				}
			}
			if turn == turns-1 {
				for _, k := range kids {
					recs = append(recs, b.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: "res" + k,
						IdempotencyKey: "kres" + k, FromThread: k, Kind: rollout.MsgResult, InReplyTo: "m" + k}))
				}
			}
			call := tid + "-c"
			recs = append(recs, b.Call(call, "shell", `{"cmd":"make test"}`, ""), b.Output(call, "ok"), b.Message("assistant", "done with "+tid))
			if turn == turns && task != "" {
				recs = append(recs, b.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: "res" + id, IdempotencyKey: "kres" + id,
					ToThread: parent, Kind: rollout.MsgResult, InReplyTo: task}))
			}
			recs = append(recs, b.TaskComplete(tid))
		}
		writeRollout(t, dir, rid, recs)
		for _, k := range kids {
			write(k, id, "m"+k, level+1)
		}
	}
	write("T", "", "", 0)
	return n, "T-0"
}

// TestWriteScaleTree writes a regular tree into $LOGBOOK_SCALE_DIR (fanout
// $LOGBOOK_SCALE_FANOUT, default 10, depth $LOGBOOK_SCALE_DEPTH, default 3:
// 1,111 threads), for measuring the CLI on it; skipped otherwise.
func TestWriteScaleTree(t *testing.T) {
	dir := os.Getenv("LOGBOOK_SCALE_DIR")
	if dir == "" {
		t.Skip("set LOGBOOK_SCALE_DIR to write a tree")
	}
	fanout, depth := envInt("LOGBOOK_SCALE_FANOUT", 10), envInt("LOGBOOK_SCALE_DEPTH", 3)
	n, sub := regularTree(t, dir, fanout, depth, 8)
	t.Logf("%d threads in %s; a subtree: %s", n, dir, sub)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// BenchmarkLineage measures the answers of tree and unconfirmed on a tree
// of 1,111 threads (LOGBOOK_BENCH_DEPTH=4: 11,111): the full scan of the
// mirror files, and the index's queries (the whole tree, a subtree of 111
// threads, unconfirmed whole and for that subtree's root).
func BenchmarkLineage(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	n, _ := regularTree(b, dir, 10, benchTreeDepth(), 8)
	sub := "T" + strings.Repeat("-0", benchTreeDepth()-2)
	rebuild(b, dir)
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.Logf("%d threads", n)
	b.Run("full-scan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c, err := tree.LoadDir(datadir.RolloutsDir(dir))
			if err != nil {
				b.Fatal(err)
			}
			tree.Build(c, tree.Options{})
		}
	})
	b.Run("index-tree", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			in, err := r.Lineage(ctx, dir)
			if err != nil {
				b.Fatal(err)
			}
			tree.Assemble(in, tree.Options{})
		}
	})
	b.Run("index-subtree", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := r.Subtree(ctx, dir, sub, tree.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("index-tree-find", func(b *testing.B) { // the subtree as it was asked before Subtree
		for i := 0; i < b.N; i++ {
			in, err := r.Lineage(ctx, dir)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tree.Assemble(in, tree.Options{}).Find(sub); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("index-unconfirmed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := r.Unconfirmed(ctx, UnconfirmedQuery{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("index-unconfirmed-thread", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := r.Unconfirmed(ctx, UnconfirmedQuery{Thread: sub}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRebuildTree measures a rebuild (catch-up with the projections)
// of a regular tree of 1,111 threads; records/s is reported.
func BenchmarkRebuildTree(b *testing.B) {
	dir := b.TempDir()
	regularTree(b, dir, 10, 3, 8)
	b.ResetTimer()
	var records int
	for i := 0; i < b.N; i++ {
		rep, err := Rebuild(context.Background(), dir, Options{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		records += rep.Records
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkCatchUpTree measures a catch-up of an empty index over a
// regular tree of 1,111 threads (what a coordinator does at start-up, and
// the mirror after each fsync): every apply judges its deliveries.
func BenchmarkCatchUpTree(b *testing.B) {
	src := b.TempDir()
	regularTree(b, src, 10, benchTreeDepth(), 8)
	b.ResetTimer()
	var records int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			b.Fatal(err)
		}
		ix, err := Open(context.Background(), dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := ix.CatchUp(context.Background(), nil)
		if err != nil {
			b.Fatal(err)
		}
		records += rep.Records
		b.StopTimer()
		ix.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

// benchTreeDepth is BenchmarkCatchUpTree's and BenchmarkLineage's tree depth: 3 (1,111 threads),
// or LOGBOOK_BENCH_DEPTH (4: 11,111 threads).
func benchTreeDepth() int {
	if d, err := strconv.Atoi(os.Getenv("LOGBOOK_BENCH_DEPTH")); err == nil && d >= 2 {
		return d
	}
	return 3
}
