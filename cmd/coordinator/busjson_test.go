package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror/mirrortest"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// writeThread writes a thread to the bus as an agent would (THREADS entry,
// lease, session_meta, then recs) and lets it go idle.
func writeThread(t *testing.T, bus *stream.Bus, thread, rid, mode string, recs func(b *rollout.Builder) []rollout.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: "agent-" + thread})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.OpenWriter(ctx, lease, rid, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Threads().Create(ctx, thread, []byte(rid)); err != nil {
		t.Fatal(err)
	}
	b := rollout.Builder{}
	all := append([]rollout.Record{b.Meta(rollout.SessionMeta{ID: thread, RolloutID: rid, Cwd: "/repo", Source: rollout.Source{Kind: "sim"}, HistoryMode: mode})}, recs(&b)...)
	for _, r := range all {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func userTurn(b *rollout.Builder, id string) []rollout.Record {
	return []rollout.Record{b.TaskStarted(id), b.UserMessage("please " + id),
		b.TurnContext(rollout.TurnContext{TurnID: id, Model: "model-large", ApprovalPolicy: "on-request"}),
		b.Message("assistant", "did "+id), b.TaskComplete(id)}
}

// records is how many records the rollout holds on the bus.
func records(t *testing.T, bus *stream.Bus, rid string) int64 {
	t.Helper()
	tail, _, _, err := bus.ValidTail(context.Background(), rid)
	if err != nil {
		t.Fatal(err)
	}
	return tail.Ordinal
}

// TestJSONOnABus decodes the --json output of every command that writes the
// bus, strictly, into the shape docs/CLI.md documents.
func TestJSONOnABus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bus")
	}
	tb := streamtest.New(t, streamtest.Options{})
	bus := []string{"--nats", tb.Server.ClientURL(), "--data", t.TempDir()} // --data: no mirror, nothing from $HOME
	cli := func(args ...string) cliResult { return runCLI(t, append(args, bus...)...) }

	var imported []importDoc
	r := cli("import", "--json", "../../testdata/codex-real")
	r.wantCode(t, exitOK)
	strictJSON(t, "import --json", r.stdout, &imported)
	if len(imported) != 6 || imported[0].Published == 0 || imported[0].ThreadID == "" {
		t.Errorf("import --json: %+v", imported)
	}

	const codex = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"
	var fork forkDoc
	r = cli("fork", "--json", codex, "--after-turn", "019c8a5a-2f22-7500-86a3-35cefafbe84e", "--mode", "reference", "--thread", "child")
	r.wantCode(t, exitOK)
	strictJSON(t, "fork --json", r.stdout, &fork)
	if fork.ThreadID != "child" || fork.FromThreadID != codex || fork.Mode != "reference" || fork.Position.RolloutID != codex ||
		fork.State == nil || len(fork.State.Turns) != 1 || fork.NotUndone == "" {
		t.Errorf("fork --json: %+v", fork)
	}

	var hist historyDoc
	r = cli("rollback", "--json", codex, "1")
	r.wantCode(t, exitOK)
	strictJSON(t, "rollback --json", r.stdout, &hist)
	if hist.ThreadID != codex || len(hist.UndoneTurns) != 1 || hist.SealedRolloutID != "" || hist.HistoryBase != nil || hist.State == nil {
		t.Errorf("rollback --json: %+v", hist)
	}

	writeThread(t, tb.Bus, "G", "rG1", rollout.HistoryPaginated, func(b *rollout.Builder) []rollout.Record {
		return append(userTurn(b, "t1"), userTurn(b, "t2")...)
	})
	r = cli("revert", "--json", "G", "--before-turn", "t2")
	r.wantCode(t, exitOK)
	strictJSON(t, "revert --json", r.stdout, &hist)
	if hist.SealedRolloutID != "rG1" || hist.RolloutID == "rG1" || hist.HistoryBase == nil || hist.HistoryBase.RolloutID != "rG1" {
		t.Errorf("revert --json: %+v", hist)
	}

	// gc: the sealed rollout is the new one's history_base, so it stays;
	// nothing to remove is [], not null.
	var gc gcDoc
	r = cli("gc", "--json", "--dry-run")
	r.wantCode(t, exitOK)
	strictJSON(t, "gc --json --dry-run", r.stdout, &gc)
	if !gc.DryRun || len(gc.Removed) != 0 || len(gc.Kept) != 1 || gc.Kept[0].RolloutID != "rG1" {
		t.Errorf("gc --json --dry-run: %+v", gc)
	}
	r = cli("gc", "--json")
	r.wantCode(t, exitOK)
	strictJSON(t, "gc --json", r.stdout, &gc)
	if gc.DryRun || len(gc.Removed) != 0 {
		t.Errorf("gc --json: %+v", gc)
	}

	// reconcile: the open call is recorded; an id that is not open is refused.
	const crashed = "019c8a70-dda7-7f33-98ea-f30553347322"
	const call = "call_UtYwHmwWekzvq83m8Rb9K8jJ"
	n := records(t, tb.Bus, crashed)
	cli("reconcile", crashed, "--call", "nope", "--outcome", "executed", "--evidence", "x").
		wantOneLineError(t, "call nope is not open in thread "+crashed, "open: "+call)
	cli("reconcile", crashed, "--msg", "m-nope", "--outcome", "executed", "--evidence", "x").
		wantOneLineError(t, "message m-nope is not open in thread "+crashed, "no message is open there")
	if got := records(t, tb.Bus, crashed); got != n {
		t.Fatalf("a refused reconcile appended: %d records, want %d", got, n)
	}
	var rec reconcileDoc
	r = cli("reconcile", "--json", crashed, "--call", call, "--outcome", "executed", "--evidence", "ls ran", "--by", "person:ops")
	r.wantCode(t, exitOK)
	strictJSON(t, "reconcile --json", r.stdout, &rec)
	if rec.ThreadID != crashed || rec.Ordinal != n+1 || rec.CallID != call || rec.MsgID != "" || rec.Outcome != "executed" || rec.By != "person:ops" {
		t.Errorf("reconcile --json: %+v", rec)
	}
	cli("reconcile", crashed, "--call", call, "--outcome", "executed", "--evidence", "again").
		wantOneLineError(t, "call "+call+" is not open", "no call is open there")

	var res resumeDoc
	r = cli("resume", "--json", crashed)
	r.wantCode(t, exitOK)
	strictJSON(t, "resume --json", r.stdout, &res)
	if res.ThreadID != crashed || res.AbortedTurn == "" || len(res.UnknownCalls) != 0 || len(res.Unresolved) != 0 || res.Appended != 1 {
		t.Errorf("resume --json: %+v", res)
	}
}

// TestResumeWithoutATerminal: nobody is asked about a keyed call, so nothing
// is recorded about it (no reconciled record crediting a person); the output
// says a person must reconcile it and how; a second resume learns nothing
// new and appends nothing.
func TestResumeWithoutATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bus")
	}
	tb := streamtest.New(t, streamtest.Options{})
	bus := []string{"--nats", tb.Server.ClientURL(), "--data", t.TempDir()}
	writeThread(t, tb.Bus, "N", "rN", "", func(b *rollout.Builder) []rollout.Record {
		return []rollout.Record{b.TaskStarted("t1"), b.UserMessage("deploy"),
			b.Call("call-deploy", "deploy", `{"version":"1.4.2"}`, "deploy-1.4.2")}
	})
	before := records(t, tb.Bus, "rN")
	reconcileCmd := "coordinator reconcile N --call call-deploy --outcome executed|not_executed|duplicate --evidence TEXT"

	r := runCLI(t, append([]string{"resume", "N"}, bus...)...) // stdin is not a terminal here
	r.wantCode(t, exitOK)
	r.wantOut(t, "recorded as turn_aborted{stale_after_crash}", "Still unknown (1)", "a person must", reconcileCmd, "Appended 1 record.")
	if strings.Contains(r.stdout, "Recorded as reconciled") || strings.Contains(r.stdout, "person:") {
		t.Errorf("a person is credited with an answer nobody gave:\n%s", r.stdout)
	}
	if got := records(t, tb.Bus, "rN"); got != before+1 {
		t.Fatalf("%d records after resume, want %d: only the turn_aborted", got, before+1)
	}

	var res resumeDoc
	r = runCLI(t, append([]string{"resume", "--json", "N"}, bus...)...)
	r.wantCode(t, exitOK)
	strictJSON(t, "resume --json", r.stdout, &res)
	if res.Appended != 0 || res.AbortedTurn != "" || len(res.Findings) != 0 || len(res.UnknownCalls) != 1 ||
		len(res.Unresolved) != 1 || res.Unresolved[0].Reconcile != reconcileCmd {
		t.Errorf("second resume --json: %+v", res)
	}
	r = runCLI(t, append([]string{"resume", "N"}, bus...)...)
	r.wantCode(t, exitOK)
	r.wantOut(t, "Nothing new learned: nothing appended.")
	if got := records(t, tb.Bus, "rN"); got != before+1 {
		t.Errorf("%d records after three resumes, want %d: the later ones learned nothing", got, before+1)
	}
}

// TestResumeReadsTheMirror: with --data naming a mirror that holds the
// thread, resume replays the mirror file and reads from the bus only what
// it appends; the text says so, and --json's read counts it. A data dir
// with no mirror file of the thread reads the bus, and says why.
func TestResumeReadsTheMirror(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bus")
	}
	tb := streamtest.New(t, streamtest.Options{})
	dir := t.TempDir()
	bus := []string{"--nats", tb.Server.ClientURL(), "--data", dir}
	turns := func(b *rollout.Builder) []rollout.Record {
		var recs []rollout.Record
		for i := range 50 {
			id := fmt.Sprintf("t%d", i)
			recs = append(recs, b.TaskStarted(id), b.UserMessage("go "+id), b.Message("assistant", "did "+id), b.TaskComplete(id))
		}
		return append(recs, b.TaskStarted("t-last"), b.UserMessage("crash here"))
	}
	writeThread(t, tb.Bus, "M", "rM", "", turns)
	mirrortest.Sync(t, tb.Bus, dir)
	n := records(t, tb.Bus, "rM")

	var res resumeDoc
	r := runCLI(t, append([]string{"resume", "--json", "M"}, bus...)...)
	r.wantCode(t, exitOK)
	strictJSON(t, "resume --json", r.stdout, &res)
	if res.Appended != 1 || res.Read.MirrorOrdinal != n || res.Read.BusRecords != 1 || res.Read.Fallback != "" {
		t.Errorf("resume from the mirror: appended %d, read %+v; want ordinals 1-%d from the mirror, 1 record from the bus", res.Appended, res.Read, n)
	}

	writeThread(t, tb.Bus, "U", "rU", "", turns) // after the mirror stopped
	r = runCLI(t, append([]string{"resume", "U"}, bus...)...)
	r.wantCode(t, exitOK)
	r.wantOut(t, fmt.Sprintf("Read %d records from the bus", n+1), "Not from the mirror: no mirror file of rollout rU.")
}
