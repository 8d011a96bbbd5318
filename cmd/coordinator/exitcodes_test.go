package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestExitCodesEveryCommand holds every command to docs/CLI.md's exit code
// table: an unknown flag, a wrong number of arguments and a bad flag value
// are usage errors (2, "Run 'coordinator CMD --help' for usage.", nothing on
// stdout); a command that runs and fails is 1 with one line. Every command
// of the tree must have cases here.
func TestExitCodesEveryCommand(t *testing.T) {
	empty := t.TempDir() // a data dir no coordinator serves: no nats.url
	tree := "../../testdata/examples/release-tree"
	usageCases := map[string][][]string{
		"replay": {{"--bogus", "x"}, {}, {"a", "b"}, {"--rollouts", tree, "--data", empty, "release-B"}},
		"verify": {{"--bogus", "x"}, {}, {"--data", empty, "x.jsonl"}},
		"serve": {{"--bogus"}, {"x"}, {"--fsync", "sometimes"}, {"--replicas", "0"}, {"--nats", "nats://x", "--fsync", "always"},
			{"--nkey", "seed.nk"}, {"--nats", "nats://x", "--auth", "users.json"}},
		"credentials": {{"--bogus"}, {"x"}},
		"tree": {{"--bogus"}, {"a", "b"}, {"--rollouts", tree, "--data", empty}, {"a", "--thread", "b"}, {"--limit", "-1"},
			{"--state", "confirmed"}},
		"unconfirmed": {{"--bogus"}, {"a", "b"}, {"--rollouts", tree, "--data", empty}, {"a", "--thread", "b"}, {"--limit", "-1"},
			{"--state", "idle"}},
		"threads": {{"--bogus"}, {"a"}, {"--limit", "0"}, {"--limit", "x"}, {"--rollouts", tree, "--data", empty}},
		"show":    {{"--bogus", "x"}, {}, {"a", "b"}},
		"reindex": {{"--bogus"}, {"a"}},
		"fork": {{"--bogus", "T"}, {}, {"T", "U"}, {"T", "--mode", "move", "--data", empty},
			{"T", "--before-turn", "a", "--after-turn", "b", "--data", empty}, {"T", "--timeout", "0s", "--data", empty}},
		"rollback": {{"--bogus", "T", "1"}, {"T"}, {"T", "1", "2"}, {"T", "zero", "--data", empty}, {"T", "0", "--data", empty},
			{"T", "-3", "--data", empty}, {"T", "1.5", "--data", empty}, {"T", "1", "--timeout", "-1s", "--data", empty}},
		"revert": {{"--bogus", "T"}, {"T"}, {"T", "U", "--before-turn", "t"}},
		"resume": {{"--bogus", "T"}, {}, {"T", "U"}, {"T", "--timeout", "0s", "--data", empty}},
		"reconcile": {{"--bogus", "T"}, {"--call", "c", "--outcome", "executed", "--evidence", "e"},
			{"T", "--call", "c", "--outcome", "maybe", "--evidence", "e", "--data", empty},
			{"T", "--call", "c", "--outcome", "executed", "--data", empty},
			{"T", "--call", "c", "--outcome", "executed", "--evidence", " ", "--data", empty},
			{"T", "--outcome", "executed", "--evidence", "e", "--data", empty},
			{"T", "--call", "c", "--msg", "m", "--outcome", "executed", "--evidence", "e", "--data", empty}},
		"gc":      {{"--bogus"}, {"a"}, {"--timeout", "0s", "--data", empty}},
		"import":  {{"--bogus", "d"}, {}, {"a", "b"}, {"d", "--timeout", "0s", "--data", empty}},
		"workers": {{"--bogus"}, {"a"}, {"--timeout", "0s", "--data", empty}},
	}
	// One failure at run time each (exit 1, one line on stderr).
	runtimeCases := map[string][]string{
		"replay":      {"missing.jsonl"},
		"verify":      {damaged(t, example("chapter-rollback-1"), corruptLine(12))},
		"serve":       {"--data", example("mid-turn-compaction")}, // a file, not a dir
		"tree":        {"--rollouts", tree, "no-such-thread"},
		"unconfirmed": {"--data", empty},
		"threads":     {"--data", empty},
		"show":        {"--data", empty, "x"},
		"reindex":     {"--data", empty + "/nope"},
		"fork":        {"T", "--data", empty},
		"rollback":    {"T", "1", "--data", empty},
		"revert":      {"T", "--before-turn", "t", "--data", empty},
		"resume":      {"T", "--data", empty},
		"reconcile":   {"T", "--call", "c", "--outcome", "executed", "--evidence", "e", "--data", empty},
		"gc":          {"--data", empty},
		"import":      {"--data", empty, tree},
		"workers":     {"--data", empty},
		"credentials": {"new", "--role", "agent", "--out", example("mid-turn-compaction")}, // exists: never replaced
	}
	root := newRootCmd(&bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range root.Commands() {
		name := c.Name()
		if name == "help" || name == "completion" {
			continue
		}
		if len(usageCases[name]) == 0 || runtimeCases[name] == nil {
			t.Errorf("command %s has no exit code cases", name)
		}
	}
	for name, cases := range usageCases {
		for _, args := range cases {
			args = append([]string{name}, args...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				r := runCLI(t, args...)
				r.wantCode(t, exitUsage)
				if !strings.HasPrefix(r.stderr, "coordinator: ") || !strings.Contains(r.stderr, "Run 'coordinator "+name+" --help' for usage.") {
					t.Errorf("stderr %q", r.stderr)
				}
				if r.stdout != "" {
					t.Errorf("stdout %q", r.stdout)
				}
			})
		}
	}
	for name, args := range runtimeCases {
		args = append([]string{name}, args...)
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runCLI(t, args...)
			r.wantOneLineError(t)
		})
	}
}
