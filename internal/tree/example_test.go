package tree

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/examples/release-tree")

const releaseTreeDir = "../../testdata/examples/release-tree"

// releaseTree is the example agent tree `make run` recovers: a parent ships
// a release through three children and the process dies at the worst
// moments.
//
//	P  ship 1.4.2; spawns A (build), B (deploy), C (notes); tasks to all
//	   three; A's result received; P dies after logging the task to C and
//	   before publishing it, its turn open
//	A  build: receives its task, builds (keyed call, output logged), sends
//	   its result: done
//	B  deploy: receives its task, calls deploy (keyed), and dies before the
//	   call's result is logged: the deploy may or may not have happened
//	C  notes: never wrote a line (its task was never published)
func releaseTree() map[string][]rollout.Record {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	clock := t0
	now := func() time.Time { clock = clock.Add(1500 * time.Millisecond); return clock }
	p := &rollout.Builder{Now: now}
	a := &rollout.Builder{Now: now}
	b := &rollout.Builder{Now: now}
	meta := func(bd *rollout.Builder, id, parent, role string) rollout.Record {
		return bd.Meta(rollout.SessionMeta{ID: id, RolloutID: "r-" + id, ParentThreadID: parent, AgentRole: role,
			Source: rollout.Source{Kind: "sim"}, Cwd: "/srv/release", HistoryMode: rollout.HistoryLegacy})
	}
	task := func(to, msg, key, what string) rollout.Record {
		return p.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: msg, IdempotencyKey: key, ToThread: to,
			Kind: rollout.MsgTask, Body: rollout.MustJSON(map[string]string{"do": what})})
	}
	tc := func(bd *rollout.Builder, turn string) rollout.Record {
		return bd.TurnContext(rollout.TurnContext{TurnID: turn, Model: "model-large", ApprovalPolicy: "on-request", Cwd: "/srv/release"})
	}
	recv := func(bd *rollout.Builder, msg, key, from, kind, reply string) rollout.Record {
		return bd.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: msg, IdempotencyKey: key,
			FromThread: from, Kind: kind, InReplyTo: reply})
	}
	spawn := func(child, role string) rollout.Record {
		return p.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: child, AgentRole: role})
	}
	var P, A, B []rollout.Record
	P = append(P, meta(p, "release-P", "", "lead"), p.TaskStarted("p1"), p.UserMessage("ship release 1.4.2 to staging"), tc(p, "p1"),
		p.Message("user", "ship release 1.4.2 to staging"),
		spawn("release-A", "build"), task("release-A", "01JDREL0TASKA000000000000A", "build-1.4.2", "build 1.4.2"),
		spawn("release-B", "deploy"), task("release-B", "01JDREL0TASKB000000000000B", "deploy-staging-1.4.2", "deploy 1.4.2 to staging"))
	A = append(A, meta(a, "release-A", "release-P", "build"), a.TaskStarted("a1"),
		recv(a, "01JDREL0TASKA000000000000A", "build-1.4.2", "release-P", rollout.MsgTask, ""), tc(a, "a1"),
		a.Call("call-build", "build", `{"version":"1.4.2"}`, "build-1.4.2"), a.Output("call-build", "artifact release-1.4.2.tar.gz"),
		a.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: "01JDREL0RESULTA00000000000A", IdempotencyKey: "build-1.4.2-result",
			ToThread: "release-P", Kind: rollout.MsgResult, InReplyTo: "01JDREL0TASKA000000000000A", Body: rollout.MustJSON(map[string]string{"artifact": "release-1.4.2.tar.gz"})}),
		a.TaskComplete("a1"))
	B = append(B, meta(b, "release-B", "release-P", "deploy"), b.TaskStarted("b1"),
		recv(b, "01JDREL0TASKB000000000000B", "deploy-staging-1.4.2", "release-P", rollout.MsgTask, ""), tc(b, "b1"),
		b.Call("call-deploy", "deploy", `{"version":"1.4.2","target":"staging"}`, "deploy-staging-1.4.2"))
	P = append(P, recv(p, "01JDREL0RESULTA00000000000A", "build-1.4.2-result", "release-A", rollout.MsgResult, "01JDREL0TASKA000000000000A"),
		spawn("release-C", "notes"), task("release-C", "01JDREL0TASKC000000000000C", "notes-1.4.2", "write the release notes"))
	return map[string][]rollout.Record{"r-release-P": P, "r-release-A": A, "r-release-B": B}
}

// TestReleaseTreeExample keeps the committed example equal to its builder,
// and checks what recovering it must show.
func TestReleaseTreeExample(t *testing.T) {
	for name, recs := range releaseTree() {
		want := rollout.MemOf(name, recs).Bytes()
		path := filepath.Join(releaseTreeDir, name+".jsonl")
		if *rewrite {
			if err := os.MkdirAll(releaseTreeDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s differs from its builder (%v): go test ./internal/tree -run TestReleaseTreeExample -rewrite", path, err)
		}
	}
	c, err := LoadDir(releaseTreeDir)
	if err != nil {
		t.Fatal(err)
	}
	tr := Build(c, Options{})
	want := map[string]string{"release-P": NeedsAttention, "release-A": Idle, "release-B": NeedsAttention, "release-C": NeedsAttention}
	for id, st := range want {
		if n := tr.Node(id); n == nil || n.Status != st {
			t.Errorf("%s: %+v, want %s", id, n, st)
		}
	}
	if n := tr.Node("release-B"); n.Counts.UnknownCalls != 1 || n.Counts.InterruptedTurns != 1 {
		t.Errorf("B: %+v", n.Counts)
	}
	if n := tr.Node("release-C"); n.RolloutID != "" || n.Counts.DeliveriesUnconfirmed != 1 {
		t.Errorf("C: %+v", n)
	}
	results := map[string]string{}
	for _, cr := range tr.ChildResults {
		results[cr.Child] = cr.State
	}
	if len(results) != 2 || results["release-B"] != dedupe.NoResult || results["release-C"] != dedupe.NoResult {
		t.Errorf("child results %v", results)
	}
}
