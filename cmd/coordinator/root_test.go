package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestHelp(t *testing.T) {
	r := runCLI(t, "--help")
	r.wantCode(t, exitOK)
	r.wantOut(t, "coordinator is Logbook's daemon", "replay      Rebuild a thread's state", "verify      Check rollout files",
		"Exit status: 0 on success, 1 when", "Examples:")

	// No command: the same help, and success.
	bare := runCLI(t)
	bare.wantCode(t, exitOK)
	if bare.stdout != r.stdout {
		t.Errorf("coordinator alone prints:\n%s", bare.stdout)
	}

	// Every command explains itself, with examples.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" || sub.Hidden {
				continue
			}
			if sub.Long == "" || sub.Example == "" || sub.Short == "" {
				t.Errorf("%s lacks a Short, Long or Example", sub.CommandPath())
			}
			h := runCLI(t, append(strings.Fields(sub.CommandPath())[1:], "--help")...)
			h.wantCode(t, exitOK)
			h.wantOut(t, "Usage:\n  "+sub.UseLine(), "Examples:\n", "Exit status:")
			walk(sub)
		}
	}
	walk(newRootCmd(nil, nil))
}

func TestVersion(t *testing.T) {
	r := runCLI(t, "--version")
	r.wantCode(t, exitOK)
	if !strings.HasPrefix(r.stdout, "coordinator ") || !strings.Contains(r.stdout, "rollout schema v1") {
		t.Errorf("--version prints %q", r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args  []string
		parts []string
	}{
		{[]string{"verfy", "x.jsonl"}, []string{`unknown command "verfy" for "coordinator"`, "Did you mean this?", "verify", "Run 'coordinator --help' for usage."}},
		{[]string{"replay", "--bogus", "x.jsonl"}, []string{"unknown flag: --bogus", "Run 'coordinator replay --help' for usage."}},
		{[]string{"verify", "-q", "x.jsonl"}, []string{"unknown shorthand flag: 'q' in -q", "coordinator verify --help"}},
		{[]string{"replay"}, []string{"replay needs a rollout FILE"}},
		{[]string{"replay", "a.jsonl", "b.jsonl"}, []string{"replay takes one FILE, got 2: a.jsonl b.jsonl"}},
		{[]string{"verify"}, []string{"verify needs at least one rollout FILE"}},
		{[]string{"replay", "--model"}, []string{"flag needs an argument: --model"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runCLI(t, tt.args...)
			r.wantCode(t, exitUsage)
			if !strings.HasPrefix(r.stderr, "coordinator: ") {
				t.Errorf("stderr %q does not start with coordinator:", r.stderr)
			}
			for _, p := range tt.parts {
				if !strings.Contains(r.stderr, p) {
					t.Errorf("stderr %q does not mention %q", r.stderr, p)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
}
