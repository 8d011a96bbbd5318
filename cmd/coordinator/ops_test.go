package main

import (
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/stream/serve"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// TestLineageCommands drives import, fork, rollback, revert, reconcile, gc
// and resume through the command line against a real bus.
func TestLineageCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bus")
	}
	tb := streamtest.New(t, streamtest.Options{})
	url := tb.Server.ClientURL()
	// Import: the six Codex sessions, then nothing the second time.
	r := runCLI(t, "import", "--nats", url, "../../testdata/codex-real")
	r.wantCode(t, exitOK)
	r.wantOut(t, "6 files: 4,760 records published, 0 already imported, 0 failed")
	runCLI(t, "import", "--nats", url, "../../testdata/codex-real").wantOut(t, "0 records published, 6 already imported")
	// The shipped examples import as a whole: each has its own thread and rollout id.
	r = runCLI(t, "import", "--nats", url, examplesDir)
	r.wantCode(t, exitOK)
	r.wantOut(t, "8 files: ", "0 already imported, 0 failed")

	const codex = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9" // 33 turns, a compaction
	// Fork by reference after its first turn.
	r = runCLI(t, "fork", "--nats", url, codex, "--after-turn", "019c8a5a-2f22-7500-86a3-35cefafbe84e", "--mode", "reference", "--thread", "child", "--json")
	r.wantCode(t, exitOK)
	var fork forkDoc
	strictJSON(t, "fork --json", r.stdout, &fork)
	if fork.ThreadID != "child" || fork.Mode != "reference" || fork.State.ForkedFromID != codex || len(fork.State.Turns) != 1 || fork.NotUndone == "" {
		t.Errorf("fork: %+v", fork)
	}
	// Rollback of the Codex thread (legacy): one user turn out of effect.
	r = runCLI(t, "rollback", "--nats", url, codex, "1")
	r.wantCode(t, exitOK)
	r.wantOut(t, "Rolled back thread "+codex, "No longer in effect: 1 turn", "NOT undone")
	// Revert is for paginated threads only.
	runCLI(t, "revert", "--nats", url, codex, "--before-turn", "x").wantOneLineError(t, "legacy", "rollback")
	r = runCLI(t, "rollback", "--nats", url, codex, "zero")
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "must be a whole number") {
		t.Errorf("rollback zero: %q", r.stderr)
	}
	// A person records what they found out about the unknown call of another session.
	const crashed = "019c8a70-dda7-7f33-98ea-f30553347322"
	r = runCLI(t, "reconcile", "--nats", url, crashed, "--call", "call_UtYwHmwWekzvq83m8Rb9K8jJ", "--outcome", "executed", "--evidence", "ls ran; output in the terminal")
	r.wantCode(t, exitOK)
	r.wantOut(t, "Recorded at ordinal 20 of thread "+crashed+": executed, by person:")
	// Resume: the stale turn is aborted; the call is no longer unknown.
	r = runCLI(t, "resume", "--nats", url, crashed)
	r.wantCode(t, exitOK)
	r.wantOut(t, "recorded as turn_aborted{stale_after_crash}")
	if strings.Contains(r.stdout, "Calls with no recorded result") {
		t.Errorf("a reconciled call is still listed as unknown:\n%s", r.stdout)
	}
	// gc has nothing to remove.
	runCLI(t, "gc", "--nats", url, "--dry-run").wantOut(t, "Would remove (dry run): 0 rollouts")
	// No bus: one clear line.
	runCLI(t, "gc", "--data", t.TempDir()).wantOneLineError(t, "nats.url", "coordinator serve")
	// A serving coordinator holds the data dir: gc refuses, --dry-run still reads.
	data := t.TempDir()
	lock, err := serve.TakeLock(data)
	if err != nil {
		t.Fatal(err)
	}
	runCLI(t, "gc", "--nats", url, "--data", data).wantOneLineError(t, "data dir in use", "stop the coordinator serving")
	runCLI(t, "gc", "--nats", url, "--data", data, "--dry-run").wantCode(t, exitOK)
	lock.Release()
	runCLI(t, "gc", "--nats", url, "--data", data).wantCode(t, exitOK)
}
