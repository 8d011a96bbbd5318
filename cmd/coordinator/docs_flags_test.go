package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestDocFlags holds docs/CLI.md to each command's --help: every flag a
// synopsis of a command names (a "coordinator CMD ..." line in a block
// without "$ " lines, or an inline code span starting "coordinator CMD")
// is one its --help lists, and every flag its --help lists is named by one
// of its synopses. A synopsis may name several commands, "coordinator
// fork|rollback ... FLAGS", for the flags they share. Every command has a
// synopsis; help and completion are cobra's and have none.
func TestDocFlags(t *testing.T) {
	text, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	_, syns, _ := markdownExamples("docs/CLI.md", string(text))
	root := newRootCmd(nil, nil)
	documented := map[string]map[string]bool{} // command -> flags
	for _, s := range syns {
		words := strings.Fields(s.text)[1:]
		if len(words) == 0 {
			continue
		}
		for _, name := range strings.Split(words[0], "|") {
			cmd, _, err := root.Find(append([]string{name}, words[1:]...))
			if err != nil || cmd == root {
				t.Errorf("%s: %q names no command", s.where, s.text)
				continue
			}
			name = cmd.Name()
			if documented[name] == nil {
				documented[name] = map[string]bool{}
			}
			help := helpFlags(t, cmd)
			for _, f := range flagRef.FindAllString(s.text, -1) {
				documented[name][f] = true
				if !help[f] {
					t.Errorf("%s: %q: coordinator %s --help has no %s", s.where, s.text, name, f)
				}
			}
		}
	}
	for _, cmd := range root.Commands() {
		name := cmd.Name()
		if name == "help" || name == "completion" || cmd.Hidden {
			continue
		}
		if documented[name] == nil {
			t.Errorf("docs/CLI.md has no synopsis of coordinator %s", name)
			continue
		}
		var missing []string
		for f := range helpFlags(t, cmd) {
			if !documented[name][f] {
				missing = append(missing, f)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("coordinator %s --help lists %s, which no synopsis in docs/CLI.md names", name, strings.Join(missing, " "))
		}
	}
}

var (
	flagRef  = regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)`)
)

// helpFlags are the flags "coordinator CMD --help" lists, --help aside.
func helpFlags(t *testing.T, cmd *cobra.Command) map[string]bool {
	t.Helper()
	r := runCLI(t, append(strings.Fields(cmd.CommandPath())[1:], "--help")...)
	r.wantCode(t, exitOK)
	_, flags, ok := strings.Cut(r.stdout, "\nFlags:\n")
	if !ok {
		t.Fatalf("coordinator %s --help lists no flags:\n%s", cmd.Name(), r.stdout)
	}
	out := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(flags, -1) {
		if m[1] != "--help" {
			out[m[1]] = true
		}
	}
	return out
}
