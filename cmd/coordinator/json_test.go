package main

import (
	"testing"
)

// TestJSONOffline decodes the --json output of every command that reads
// files or a data dir, strictly, into the shape docs/CLI.md documents.
func TestJSONOffline(t *testing.T) {
	tree := "../../testdata/examples/release-tree"
	var st stateDoc
	r := runCLI(t, "replay", "--json", example("mid-turn-compaction"))
	r.wantCode(t, exitOK)
	strictJSON(t, "replay --json", r.stdout, &st)
	r = runCLI(t, "replay", "--json", "--rollouts", tree, "release-B")
	r.wantCode(t, exitOK)
	strictJSON(t, "replay --rollouts --json", r.stdout, &st)

	var files []verifyFileDoc
	r = runCLI(t, "verify", "--json", example("mid-turn-compaction"), damaged(t, example("chapter-rollback-1"), corruptLine(12)))
	r.wantCode(t, exitFailure)
	strictJSON(t, "verify --json", r.stdout, &files)
	if len(files) != 2 || !files[0].OK || files[1].OK || len(files[1].Problems) == 0 {
		t.Errorf("verify --json: %+v", files)
	}

	var tr treeDoc
	r = runCLI(t, "tree", "--json", "--rollouts", tree)
	r.wantCode(t, exitOK)
	strictJSON(t, "tree --json", r.stdout, &tr)
	if len(tr.Roots) != 1 || len(tr.Roots[0].Children) != 3 {
		t.Errorf("tree --json: %+v", tr)
	}
	r = runCLI(t, "tree", "--json", "--rollouts", t.TempDir())
	r.wantCode(t, exitOK)
	strictJSON(t, "tree --json of nothing", r.stdout, &tr)

	var un unconfirmedDoc
	r = runCLI(t, "unconfirmed", "--json", "--rollouts", tree)
	r.wantCode(t, exitOK)
	strictJSON(t, "unconfirmed --json", r.stdout, &un)
	if len(un.ChildResults) == 0 || len(un.Deliveries) == 0 {
		t.Errorf("unconfirmed --json: %+v", un)
	}
	r = runCLI(t, "unconfirmed", "--json", "--rollouts", t.TempDir())
	r.wantCode(t, exitOK)
	strictJSON(t, "unconfirmed --json of nothing", r.stdout, &un)

	var page threadsDoc
	r = runCLI(t, "threads", "--json", "--rollouts", tree)
	r.wantCode(t, exitOK)
	strictJSON(t, "threads --rollouts --json", r.stdout, &page)
	if len(page.Threads) != 3 {
		t.Errorf("threads --rollouts --json: %+v", page)
	}

	dir := dataDir(t, 0)
	runCLI(t, "reindex", "--data", dir).wantCode(t, exitOK)
	r = runCLI(t, "threads", "--json", "--data", dir)
	r.wantCode(t, exitOK)
	strictJSON(t, "threads --json", r.stdout, &page)
	r = runCLI(t, "threads", "--json", "--data", dir, "--search", "no such words anywhere")
	r.wantCode(t, exitOK)
	strictJSON(t, "threads --json, no match", r.stdout, &page)
	if len(page.Threads) != 0 {
		t.Errorf("threads --json, no match: %+v", page)
	}
	r = runCLI(t, "show", "--json", "--data", dir, "thread-M")
	r.wantCode(t, exitOK)
	strictJSON(t, "show --json", r.stdout, &st)

	var vd verifyDataDoc
	r = runCLI(t, "verify", "--json", "--data", dir) // no bus: exit 1, the JSON says why
	r.wantCode(t, exitFailure)
	strictJSON(t, "verify --data --json", r.stdout, &vd)
	if vd.Bus.Checked || vd.Bus.Note == "" || !vd.Index.Checked {
		t.Errorf("verify --data --json: %+v", vd)
	}
}
