package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocExamples runs every example of docs/CLI.md, of the README's sh
// blocks, of the root help and of every command's help (how they are read:
// docs_extract_test.go) against the built binary, and compares the output
// and exit code each claims.
//
// The world they run in (docs/CLI.md says so under "Examples"): the current
// directory holds a copy of testdata/, damaged.jsonl, notes.txt and
// cold/rollout-A.jsonl.zst (newDocEnv); $HOME holds .codex/sessions (the
// Codex sessions of testdata/codex-real) and the data dir .logbook, served
// by one "coordinator serve" into which testdata/examples and
// testdata/codex-real were imported. Every data dir the docs name
// (dataPlaceholders) is that one. A "serve" example runs on a fresh data
// dir instead, both listeners on port 0, until it serves; then SIGTERM must
// stop it with exit 0. "reindex" runs with the coordinator stopped (it
// refuses while one serves); fork, rollback, revert, resume, reconcile,
// import, gc and verify --data with it serving. Examples run in the order:
// docs/CLI.md, the root help, the README, each command's help.
//
// Output is compared after normalizing both sides: the data dir's path
// reads as the placeholder the command used, $HOME as ~, durations as <d>
// and rates (N records/s) as <n> records/s. In the output shown, a line
// "..." stands for any lines and "..." within a line for any text. With no
// output shown only the exit code is checked: the one claimed ("$ echo $?",
// "# exit N"), else 1 when the output shown ends in a "coordinator: " error
// line, else 0.
func TestDocExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	exs, bad := allDocExamples(t)
	for _, b := range bad {
		t.Errorf("unclassified example: %s", b)
	}
	e := newDocEnv(t)
	e.importAll()
	ran := 0
	for _, ex := range exs {
		switch {
		case ex.make:
			t.Logf("%s: %s: a make target, not run here", ex.where, ex.line)
			continue
		case ex.sim:
			t.Logf("%s: %s: agent-sim, run by e2e/agents_test.go", ex.where, ex.line)
			continue
		case ex.build:
			continue // newDocEnv built it so
		}
		ran++
		e.runExample(ex)
	}
	e.serving(false)
	t.Logf("%d examples run", ran)
}

// allDocExamples collects the examples in the order they run.
func allDocExamples(t *testing.T) ([]docExample, []string) {
	t.Helper()
	var exs []docExample
	var bad []string
	for _, page := range []string{"docs/CLI.md", "", "README.md"} {
		if page == "" {
			root := newRootCmd(nil, nil)
			ex, b := parseExampleText("coordinator --help, example", root.Example)
			exs, bad = append(exs, ex...), append(bad, b...)
			continue
		}
		text, err := os.ReadFile(filepath.Join("../..", page))
		if err != nil {
			t.Fatal(err)
		}
		ex, _, b := markdownExamples(page, string(text))
		exs, bad = append(exs, ex...), append(bad, b...)
	}
	root := newRootCmd(nil, nil)
	root.Example = "" // run above, after docs/CLI.md
	ex, b := helpExamples(root)
	return append(exs, ex...), append(bad, b...)
}

// runExample runs one example and reports where it differs from the docs.
func (e *docEnv) runExample(ex docExample) {
	t := e.t
	t.Helper()
	args, used := e.mapArgs(ex.args)
	if ex.notRun != "" {
		_, stderr, code := e.run(append(args, "--help")...)
		if code != exitOK {
			t.Errorf("%s: %s (not run here: %s): with --help it exits %d, so it does not even parse:\n%s", ex.where, ex.line, ex.notRun, code, stderr)
		}
		return
	}
	if len(args) > 0 && args[0] == "serve" {
		e.runServe(ex, args)
		return
	}
	switch needs(args) {
	case "bus":
		e.serving(true)
	case "stopped":
		e.serving(false)
	}
	stdout, stderr, code := e.run(args...)
	want := ex.exit
	if !ex.exitOK {
		want = exitOK
		if n := len(ex.want); n > 0 && strings.HasPrefix(ex.want[n-1], "coordinator: ") && !strings.HasPrefix(ex.want[n-1], "coordinator: warning:") {
			want = exitFailure
		}
	}
	if code != want {
		t.Errorf("%s: %s: exit %d, the docs claim %d\nstdout:\n%s\nstderr:\n%s", ex.where, ex.line, code, want, stdout, stderr)
	}
	if !ex.shown {
		return
	}
	got := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if stdout == "" {
		got = nil
	}
	if stderr != "" {
		got = append(got, strings.Split(strings.TrimRight(stderr, "\n"), "\n")...)
	}
	got = filter(got, ex.pipe)
	for i := range got {
		got[i] = e.unmap(got[i], used)
	}
	if !matchOutput(normalize(ex.want), normalize(got)) {
		t.Errorf("%s: %s: the output differs from the docs\ndocs:\n%s\nbinary:\n%s", ex.where, ex.line, strings.Join(ex.want, "\n"), strings.Join(got, "\n"))
	}
}

// runServe checks that a serve example serves and stops cleanly.
func (e *docEnv) runServe(ex docExample, args []string) {
	var extra []string
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "--data", "--nats-listen", "--listen":
			i++ // replaced: a fresh data dir, port 0
		default:
			extra = append(extra, args[i])
		}
	}
	e.t.Logf("%s: %s: runs as serve --data <fresh dir> --nats-listen 127.0.0.1:0 --listen 127.0.0.1:0 %s", ex.where, ex.line, strings.Join(extra, " "))
	dir := filepath.Join(e.t.TempDir(), "data")
	cmd, done, logs := e.startServe(dir, extra...)
	e.stopServe(dir, cmd, done, logs)
}

// needs says whether a command needs the data dir served ("bus"), not
// served ("stopped"), or either.
func needs(args []string) string {
	if len(args) == 0 {
		return ""
	}
	switch args[0] {
	case "fork", "rollback", "revert", "resume", "reconcile", "import", "gc":
		return "bus"
	case "reindex":
		return "stopped"
	case "verify":
		for _, a := range args {
			if a == "--data" || strings.HasPrefix(a, "--data=") {
				return "bus"
			}
		}
	}
	return ""
}

// mapArgs maps the docs' paths to the test's: a data dir placeholder to the
// served data dir, ~ to $HOME, and a glob to the files it matches in the
// work dir. used is the placeholder each real path came from.
func (e *docEnv) mapArgs(args []string) (out []string, used map[string]string) {
	used = map[string]string{}
	for _, a := range args {
		for _, p := range dataPlaceholders {
			if a == p || strings.HasPrefix(a, p+"/") {
				used[e.data] = p
				a = e.data + a[len(p):]
				break
			}
		}
		if rest, ok := strings.CutPrefix(a, "~/"); ok {
			a = filepath.Join(e.home, rest)
		}
		if strings.Contains(a, "*") {
			pattern := a
			if !filepath.IsAbs(a) {
				pattern = filepath.Join(e.work, a)
			}
			matches, _ := filepath.Glob(pattern)
			if len(matches) == 0 {
				e.t.Errorf("%s matches no file", a)
			}
			for _, m := range matches {
				if !filepath.IsAbs(a) {
					m, _ = filepath.Rel(e.work, m)
				}
				out = append(out, m)
			}
			continue
		}
		out = append(out, a)
	}
	return out, used
}

// unmap writes the test's paths in a line of output as the docs do.
func (e *docEnv) unmap(line string, used map[string]string) string {
	p := used[e.data]
	if p == "" {
		p = "~/.logbook"
	}
	line = strings.ReplaceAll(line, e.data, p)
	line = strings.ReplaceAll(line, e.home, "~")
	return strings.ReplaceAll(line, e.work+"/", "")
}

// filter applies "| tail -N" or "| head -N".
func filter(lines, pipe []string) []string {
	if len(pipe) == 0 {
		return lines
	}
	n, _ := strconv.Atoi(pipe[1][1:])
	n = min(n, len(lines))
	if pipe[0] == "tail" {
		return lines[len(lines)-n:]
	}
	return lines[:n]
}

var (
	durations = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s|m|h)\b`)
	rates     = regexp.MustCompile(`\b[\d,.]+ records/s\b`)
)

func normalize(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		l = rates.ReplaceAllString(l, "<n> records/s")
		out[i] = strings.TrimRight(durations.ReplaceAllString(l, "<d>"), " \t")
	}
	return out
}

// matchOutput says whether got is what want shows: a want line "..." is any
// lines, "..." within a line any text.
func matchOutput(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if matchOutput(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && matchLine(want[0], got[0]) && matchOutput(want[1:], got[1:])
}

func matchLine(want, got string) bool {
	parts := strings.Split(want, "...")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}
