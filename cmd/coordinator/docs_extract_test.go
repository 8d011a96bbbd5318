package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// The examples the docs show, as TestDocExamples reads them.
//
// In docs/CLI.md (and any markdown page): inside a fenced block, a line
// starting with "$ " is a command (a trailing "\" continues it on the next
// line); the lines after it, up to the next "$ " line or the end of the
// block, are its output as a terminal shows it (stdout, then stderr). "$ echo
// $?" and the number under it give the exit code of the command before. In a
// block whose info string is "sh" (the README's), every line is a command,
// "$ " or not. A line at column 0 starting "coordinator " in a block without
// "$ " lines, and an inline code span starting "coordinator ", are synopses:
// TestDocFlags holds their flags to the binary's.
//
// In the root help's and every command's Example: every line that is not
// blank and not a "# comment" is a command.
//
// A command line may end in a shell comment. Two comments are marks the test
// understands, anything else is for the reader:
//
//	# exit N              the command exits N (when no output shows it)
//	# not run here: WHY   the command is only parsed (run with --help, which
//	                      must exit 0): it needs what a test cannot have
//
// The program is "coordinator", "./coordinator" or "bin/coordinator"; "go
// build -o coordinator ./cmd/coordinator" is the build the test does itself;
// a "make" target in the README is not a coordinator example (the Makefile's
// own tests run those), nor is an agent-sim command (e2e/agents_test.go runs
// the simulator's world, workers and runs). Anything else is unclassified and fails the test.

// docExample is one command line the docs show.
type docExample struct {
	where  string   // docs/CLI.md:123, or the help it is in
	line   string   // the command as written, continuation lines joined
	args   []string // after the program name
	pipe   []string // a filter it is piped into: tail -N or head -N
	want   []string // the output shown under it
	shown  bool     // whether any output is shown
	exit   int      // the exit code the docs claim
	exitOK bool     // exit was claimed by "$ echo $?" or "# exit N"
	notRun string   // why it is only parsed ("# not run here: WHY")
	build  bool     // the go build step
	make   bool     // a make target (README)
	sim    bool     // an agent-sim command (README): e2e/agents_test.go runs the simulator
}

// docSynopsis is a synopsis or an inline mention of a command line.
type docSynopsis struct {
	where string
	text  string
}

// parseCommand classifies one command line. An error means the line is not
// something the test knows how to run.
func parseCommand(where, line string) (docExample, error) {
	ex := docExample{where: where, line: line}
	words, comment, err := shellWords(line)
	if err != nil {
		return ex, err
	}
	if err := ex.mark(comment); err != nil {
		return ex, err
	}
	for i, w := range words {
		if w == "|" {
			ex.pipe = words[i+1:]
			words = words[:i]
			if !validPipe(ex.pipe) {
				return ex, fmt.Errorf("piped into %q: only tail -N and head -N are understood", strings.Join(ex.pipe, " "))
			}
			break
		}
	}
	if len(words) == 0 {
		return ex, fmt.Errorf("no command")
	}
	switch words[0] {
	case "coordinator", "./coordinator", "bin/coordinator":
		ex.args = words[1:]
		return ex, nil
	case "make":
		ex.make = true
		return ex, nil
	case "agent-sim", "bin/agent-sim":
		ex.sim = true
		return ex, nil
	case "go":
		if strings.Join(words, " ") == "go build -o coordinator ./cmd/coordinator" {
			ex.build = true
			return ex, nil
		}
	}
	return ex, fmt.Errorf("not a coordinator command")
}

var exitMark = regexp.MustCompile(`^exit (\d+)\b`)

// mark reads the marks of a trailing comment.
func (ex *docExample) mark(comment string) error {
	c := strings.TrimSpace(comment)
	if why, ok := strings.CutPrefix(c, "not run here:"); ok {
		if ex.notRun = strings.TrimSpace(why); ex.notRun == "" {
			return fmt.Errorf("# not run here: says no why")
		}
	}
	if m := exitMark.FindStringSubmatch(c); m != nil {
		ex.exit, _ = strconv.Atoi(m[1])
		ex.exitOK = true
	}
	return nil
}

func validPipe(p []string) bool {
	if len(p) != 2 || (p[0] != "tail" && p[0] != "head") || !strings.HasPrefix(p[1], "-") {
		return false
	}
	n, err := strconv.Atoi(p[1][1:])
	return err == nil && n > 0
}

// shellWords splits a command line as a POSIX shell would for the quoting
// the docs use: blanks separate words, '...' is literal, "..." keeps blanks
// (\" and \\ escaped), a "|" word is a pipe, and "#" starting a word begins
// a comment, returned apart.
func shellWords(s string) (words []string, comment string, err error) {
	var w strings.Builder
	in := false // inside a word
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		case c == '#' && !in:
			return words, s[i+1:], nil
		case c == '|' && !in:
			words = append(words, "|")
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, "", fmt.Errorf("unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i, in = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, "", fmt.Errorf("unterminated \"")
			}
			in = true
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, "", nil
}

// markdownExamples reads the commands, outputs and synopses of a markdown
// page; bad lists the lines it could not classify.
func markdownExamples(name, text string) (exs []docExample, syn []docSynopsis, bad []string) {
	lines := strings.Split(text, "\n")
	add := func(where, line string) {
		ex, err := parseCommand(where, line)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %s: %v", where, line, err))
			return
		}
		exs = append(exs, ex)
	}
	var prose []string // text outside fences, for inline synopses
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "```")
		if !ok {
			prose = append(prose, lines[i])
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), "```") {
			end++
		}
		block := lines[start:end]
		i = end
		hasDollar := false
		for _, l := range block {
			hasDollar = hasDollar || strings.HasPrefix(l, "$ ")
		}
		for j := 0; j < len(block); j++ {
			l, where := block[j], fmt.Sprintf("%s:%d", name, start+j+1)
			switch {
			case info == "sh":
				if strings.TrimSpace(l) != "" {
					add(where, strings.TrimPrefix(strings.TrimSpace(l), "$ "))
				}
			case strings.HasPrefix(l, "$ "):
				cmd := strings.TrimPrefix(l, "$ ")
				for strings.HasSuffix(cmd, "\\") && j+1 < len(block) {
					j++
					cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(block[j])
				}
				var out []string
				for j+1 < len(block) && !strings.HasPrefix(block[j+1], "$ ") {
					j++
					out = append(out, block[j])
				}
				for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
					out = out[:len(out)-1]
				}
				if strings.TrimSpace(cmd) == "echo $?" {
					code, err := strconv.Atoi(strings.Join(out, ""))
					if len(exs) == 0 || err != nil {
						bad = append(bad, where+": echo $? without a command before it and one number after it")
						continue
					}
					exs[len(exs)-1].exit, exs[len(exs)-1].exitOK = code, true
					continue
				}
				before := len(exs)
				add(where, cmd)
				if len(exs) > before {
					exs[before].want, exs[before].shown = out, len(out) > 0
				}
			case !hasDollar && strings.HasPrefix(l, "coordinator "):
				syn = append(syn, docSynopsis{where: where, text: l})
			case !hasDollar && (strings.HasPrefix(l, "./coordinator ") || strings.HasPrefix(l, "bin/coordinator ")):
				bad = append(bad, where+": "+l+": a command without \"$ \" outside a sh block")
			}
		}
	}
	for _, m := range inlineCode.FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		if s := strings.Join(strings.Fields(m[1]), " "); strings.HasPrefix(s, "coordinator ") {
			syn = append(syn, docSynopsis{where: name + " (inline)", text: s})
		}
	}
	return exs, syn, bad
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// helpExamples reads the Example of root and of every command under it.
func helpExamples(root *cobra.Command) (exs []docExample, bad []string) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		e, b := parseExampleText(c.CommandPath()+" --help, example", c.Example)
		exs, bad = append(exs, e...), append(bad, b...)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return exs, bad
}

// parseExampleText reads one Example: every line not blank and not a "#
// comment" is a command.
func parseExampleText(where, text string) (exs []docExample, bad []string) {
	for n, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		w := fmt.Sprintf("%s line %d", where, n+1)
		ex, err := parseCommand(w, l)
		if err == nil && (ex.make || ex.build) {
			err = fmt.Errorf("not a coordinator command")
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %s: %v", w, l, err))
			continue
		}
		exs = append(exs, ex)
	}
	return exs, bad
}
