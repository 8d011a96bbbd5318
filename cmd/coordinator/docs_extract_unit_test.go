package main

import (
	"slices"
	"strings"
	"testing"
)

// TestDocExtract: how TestDocExamples reads a page, on a page made up for
// it: what it runs, what it compares, and that what it cannot classify is
// listed rather than skipped.
func TestDocExtract(t *testing.T) {
	page := strings.Join([]string{
		"Inline `coordinator gc [--dry-run]` is a synopsis.",
		"```",
		"coordinator replay FILE [--json]",
		"```",
		"```",
		`$ coordinator threads --search "login timeout" \`,
		"    --limit 3",
		"THREAD  ...",
		"...",
		"$ coordinator replay damaged.jsonl | tail -2",
		"$ echo $?",
		"1",
		"$ coordinator serve --nats nats://n1:4222 --replicas 3  # not run here: needs a cluster",
		"$ coordinator verify --require-crc x.jsonl  # exit 1: no crc",
		"$ ls -l",
		"$ coordinator replay x.jsonl | grep turn",
		"```",
		"```sh",
		"make build   # bin/coordinator",
		"bin/coordinator tree --rollouts ~/.codex/sessions",
		"```",
	}, "\n")
	exs, syn, bad := markdownExamples("page.md", page)
	var got []string
	for _, ex := range exs {
		got = append(got, strings.Join(ex.args, " "))
	}
	want := []string{"threads --search login timeout --limit 3", "replay damaged.jsonl", "serve --nats nats://n1:4222 --replicas 3",
		"verify --require-crc x.jsonl", "", "tree --rollouts ~/.codex/sessions"}
	if !slices.Equal(got, want) {
		t.Fatalf("commands %q, want %q", got, want)
	}
	if ex := exs[0]; ex.args[2] != "login timeout" || !slices.Equal(ex.want, []string{"THREAD  ...", "..."}) || ex.exitOK {
		t.Errorf("threads: args %q, output %q, exit claimed %v", ex.args, ex.want, ex.exitOK)
	}
	if ex := exs[1]; !ex.exitOK || ex.exit != 1 || !slices.Equal(ex.pipe, []string{"tail", "-2"}) || ex.shown {
		t.Errorf("replay: exit %d (claimed %v), pipe %q, shown %v", ex.exit, ex.exitOK, ex.pipe, ex.shown)
	}
	if exs[2].notRun != "needs a cluster" || !exs[3].exitOK || exs[3].exit != 1 || !exs[4].make {
		t.Errorf("marks: not run %q, exit %d (%v), make %v", exs[2].notRun, exs[3].exit, exs[3].exitOK, exs[4].make)
	}
	if len(bad) != 2 || !strings.Contains(bad[0], "ls -l: not a coordinator command") || !strings.Contains(bad[1], "only tail -N and head -N") {
		t.Errorf("unclassified: %q", bad)
	}
	if len(syn) != 2 || syn[0].text != "coordinator replay FILE [--json]" || syn[1].text != "coordinator gc [--dry-run]" {
		t.Errorf("synopses: %+v", syn)
	}

	// Elision: "..." alone is any lines, within a line any text.
	out := []string{"THREAD  CREATED", "a", "b", "3 threads"}
	if !matchOutput([]string{"THREAD  ...", "...", "3 threads"}, out) {
		t.Error("elided output does not match")
	}
	if matchOutput([]string{"THREAD  ...", "3 threads"}, out) || matchOutput([]string{"...", "2 threads"}, out) {
		t.Error("output matched with lines missing or different")
	}
	if got := normalize([]string{"Reindexed: 4,906 records in 65ms (75,325 records/s)"}); got[0] != "Reindexed: 4,906 records in <d> (<n> records/s)" {
		t.Errorf("normalized %q", got[0])
	}
}
