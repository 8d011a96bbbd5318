package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Test inputs: mirror-like data dirs built from generated logs, the real
// Codex sessions, the examples and a lineage scenario written with Builder.

const (
	examplesDir = "../../testdata/examples"
	codexGlob   = "../../testdata/codex-real/sessions/*/*/*/*.jsonl"
)

// writeRollout writes records as dir/rollouts/<id>.jsonl.
func writeRollout(t testing.TB, dir, id string, recs []rollout.Record) string {
	t.Helper()
	return writeMirrorFile(t, dir, id, rollout.MemOf(id, recs).Bytes())
}

func writeMirrorFile(t testing.TB, dir, id string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(datadir.RolloutsDir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, datadir.Rollouts, id+datadir.JSONLExt)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// copyRealRollouts copies the six Codex sessions and two examples into dir,
// each named by its rollout id as the mirror names files.
func copyRealRollouts(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(codexGlob)
	if err != nil || len(paths) != 6 {
		t.Fatalf("want the six Codex sessions, found %d (%v)", len(paths), err)
	}
	paths = append(paths, filepath.Join(examplesDir, "chapter-rollback-2.jsonl"), filepath.Join(examplesDir, "mid-turn-compaction.jsonl"))
	var ids []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		line, _, _ := bytes.Cut(data, []byte("\n"))
		rec, err := rollout.DecodeLine(line)
		if err != nil {
			t.Fatal(err)
		}
		m, err := rollout.Decode[rollout.SessionMeta](&rec)
		if err != nil {
			t.Fatal(err)
		}
		writeMirrorFile(t, dir, m.Rollout(), data)
		ids = append(ids, m.Rollout())
	}
	return ids
}

// genRollouts writes n generated logs starting at seed from; v0 writes
// version-0 (Codex-form) logs, half of them with task_started.
func genRollouts(t testing.TB, dir string, from int64, n, records int, v0 bool) {
	t.Helper()
	for s := from; s < from+int64(n); s++ {
		cfg := gen.Config{Seed: s, Records: records + int(s%7)*records/5, V0: v0, V0TaskStarted: v0 && s%2 == 0}
		recs := gen.All(cfg)
		id := fmt.Sprintf("rollout-%d", s)
		if v0 {
			id = fmt.Sprintf("thread-%d", s)
		}
		writeRollout(t, dir, id, recs)
	}
}

// clock stamps Builder records a second apart from a fixed start.
func clock(start time.Time) func() time.Time {
	t := start
	return func() time.Time { t = t.Add(time.Second); return t }
}

// lineage writes a parent that spawns a child and exchanges a task and a
// result with it, a Codex-form subagent, a fork, a receipt rolled back, and a
// thread reverted onto a second rollout.
func lineage(t testing.TB, dir string) {
	t.Helper()
	now := clock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	p := rollout.Builder{Now: now}
	writeRollout(t, dir, "r-parent", []rollout.Record{
		p.Meta(rollout.SessionMeta{ID: "t-parent", RolloutID: "r-parent", Source: rollout.Source{Kind: "cli"}, Cwd: "/work/app"}),
		p.TaskStarted("p1"),
		p.UserMessage("Split the migration between two helpers"),
		p.TurnContext(rollout.TurnContext{TurnID: "p1", Model: "model-large", ApprovalPolicy: "never"}),
		p.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: "t-child", AgentRole: "worker"}),
		p.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: "m-task", IdempotencyKey: "k-task", ToThread: "t-child", Kind: rollout.MsgTask}),
		p.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: "t-never-wrote"}),
		p.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: "m-result", IdempotencyKey: "k-result", FromThread: "t-child", Kind: rollout.MsgResult, InReplyTo: "m-task"}),
		p.TaskComplete("p1"),
		p.TaskStarted("p2"),
		p.UserMessage("Again"),
		p.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: "m-late", IdempotencyKey: "k-late", FromThread: "t-child", Kind: rollout.MsgNote}),
		p.TaskComplete("p2"),
		p.RolledBack(1),
	})
	c := rollout.Builder{Now: now}
	writeRollout(t, dir, "r-child", []rollout.Record{
		c.Meta(rollout.SessionMeta{ID: "t-child", RolloutID: "r-child", ParentThreadID: "t-parent", Source: rollout.Source{Kind: "subagent"}, AgentRole: "worker", Cwd: "/work/app"}),
		c.TaskStarted("c1"),
		c.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: "m-task", IdempotencyKey: "k-task", FromThread: "t-parent", Kind: rollout.MsgTask}),
		c.Message("assistant", "done"),
		c.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: "m-result", IdempotencyKey: "k-result", ToThread: "t-parent", Kind: rollout.MsgResult, InReplyTo: "m-task"}),
		c.TaskComplete("c1"),
	})
	x := rollout.Builder{Now: now}
	codexSub := rollout.Source{Raw: []byte(`{"subagent":{"thread_spawn":{"parent_thread_id":"t-parent","depth":1}}}`)}
	writeRollout(t, dir, "t-codexsub", []rollout.Record{
		x.Meta(rollout.SessionMeta{ID: "t-codexsub", Source: codexSub, Cwd: "/work/app"}),
		x.TaskStarted("x1"),
		x.UserMessage("Review the diff"),
	})
	f := rollout.Builder{Now: now}
	writeRollout(t, dir, "r-fork", []rollout.Record{
		f.Meta(rollout.SessionMeta{ID: "t-fork", RolloutID: "r-fork", ForkedFromID: "t-parent", Source: rollout.Source{Kind: "cli"}, Cwd: "/work/app"}),
		f.TaskStarted("f1"),
		f.UserMessage("Try another split"),
		f.TaskComplete("f1"),
	})
	r1 := rollout.Builder{Now: now}
	writeRollout(t, dir, "r-rev-1", []rollout.Record{
		r1.Meta(rollout.SessionMeta{ID: "t-rev", RolloutID: "r-rev-1", Source: rollout.Source{Kind: "cli"}, Cwd: "/work/rev", HistoryMode: rollout.HistoryPaginated}),
		r1.TaskStarted("v1"),
		r1.UserMessage("First attempt"),
		r1.TurnContext(rollout.TurnContext{TurnID: "v1", Model: "model-small", ApprovalPolicy: "never"}),
		r1.TaskComplete("v1"),
		r1.Event(rollout.RolloutSealed{Type: rollout.EventRolloutSealed, SuccessorRolloutID: "r-rev-2"}),
	})
	r2 := rollout.Builder{Now: now}
	writeRollout(t, dir, "r-rev-2", []rollout.Record{
		r2.Meta(rollout.SessionMeta{ID: "t-rev", RolloutID: "r-rev-2", Source: rollout.Source{Kind: "cli"}, Cwd: "/work/rev", HistoryMode: rollout.HistoryPaginated,
			HistoryBase: &rollout.HistoryPosition{RolloutID: "r-rev-1", EndOrdinalExclusive: 2, EndByteOffset: 100}}),
		r2.TaskStarted("v2"),
		r2.TurnContext(rollout.TurnContext{TurnID: "v2", Model: "model-mini", ApprovalPolicy: "never"}),
	})
}

// fullDataDir builds a data dir with every kind of input.
func fullDataDir(t testing.TB, v1, v0, records int) string {
	t.Helper()
	dir := genDataDir(t, v1, v0, records)
	copyRealRollouts(t, dir)
	return dir
}

// genDataDir builds a data dir of generated rollouts and the lineage
// scenario.
func genDataDir(t testing.TB, v1, v0, records int) string {
	t.Helper()
	dir := t.TempDir()
	genRollouts(t, dir, 1, v1, records, false)
	genRollouts(t, dir, 1001, v0, records, true)
	lineage(t, dir)
	return dir
}

// short picks the smaller of two sizes under -short.
func short(long, short int) int {
	if testing.Short() {
		return short
	}
	return long
}

// entriesOf reads every intact record of a file, with line numbers.
func entriesOf(t testing.TB, path string) []rollout.Entry {
	t.Helper()
	f, err := rollout.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := f.Forward(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []rollout.Entry
	for {
		e, err := cur.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		var ce *rollout.CorruptionError
		if errors.As(err, &ce) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

func openDir(t testing.TB, dir string) *Index {
	t.Helper()
	ix, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func catchUp(t testing.TB, ix *Index) CatchUpReport {
	t.Helper()
	rep, err := ix.CatchUp(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func rebuild(t testing.TB, dir string) {
	t.Helper()
	rep, err := Rebuild(context.Background(), dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("rebuild problems: %v", rep.Problems)
	}
}

// sameRows fails when two index files differ.
func sameRows(t testing.TB, a, b string) {
	t.Helper()
	diffs, err := DiffFiles(context.Background(), a, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

func count(t testing.TB, q queryer, query string, args ...any) int {
	t.Helper()
	var n int
	if err := q.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
