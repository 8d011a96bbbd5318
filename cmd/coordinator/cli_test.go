package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Shared inputs and helpers of the command tests.

const (
	examplesDir = "../../testdata/examples"
	goldenDir   = "../../internal/replay/testdata/golden"
	codexGlob   = "../../testdata/codex-real/sessions/*/*/*/*.jsonl"
)

func example(name string) string { return filepath.Join(examplesDir, name+".jsonl") }

// codexFiles returns the six real Codex sessions.
func codexFiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(codexGlob)
	if err != nil || len(paths) != 6 {
		t.Fatalf("want the six Codex sessions, found %d (%v)", len(paths), err)
	}
	return paths
}

// cliResult is what one in-process run of the command tree did.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the command tree built by newRootCmd in-process.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), newRootCmd(&out, &errb), args)
	return cliResult{stdout: out.String(), stderr: errb.String(), code: code}
}

// wantCode fails the test when the run did not exit with code.
func (r cliResult) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// wantOneLineError checks stderr is one "coordinator: ..." line holding
// every part.
func (r cliResult) wantOneLineError(t *testing.T, parts ...string) {
	t.Helper()
	r.wantCode(t, exitFailure)
	if !strings.HasPrefix(r.stderr, "coordinator: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr is not one coordinator: line: %q", r.stderr)
	}
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) {
			t.Errorf("stderr %q does not mention %q", r.stderr, p)
		}
	}
}

// wantOut checks stdout holds every part.
func (r cliResult) wantOut(t *testing.T, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.stdout, p) {
			t.Errorf("stdout does not hold %q:\n%s", p, r.stdout)
		}
	}
}

// damaged writes a copy of src, its lines (each with its '\n') edited by fn,
// into a temporary directory and returns its path.
func damaged(t *testing.T, src string, fn func(lines [][]byte) [][]byte) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	path := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(path, bytes.Join(fn(lines), nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tornTail cuts the last line in half: a write cut short.
func tornTail(lines [][]byte) [][]byte {
	last := lines[len(lines)-1]
	lines[len(lines)-1] = last[:len(last)/2]
	return lines
}

// corruptLine makes line n (1-based) unparsable.
func corruptLine(n int) func([][]byte) [][]byte {
	return func(lines [][]byte) [][]byte {
		l := bytes.Clone(lines[n-1])
		l[len(l)/2] = '#'
		lines[n-1] = l
		return lines
	}
}

// flipPayload changes a payload byte of line n without fixing its crc.
func flipPayload(t *testing.T, n int, old, new string) func([][]byte) [][]byte {
	return func(lines [][]byte) [][]byte {
		l := bytes.Replace(lines[n-1], []byte(old), []byte(new), 1)
		if bytes.Equal(l, lines[n-1]) {
			t.Fatalf("flipPayload: %q is not in line %d", old, n)
		}
		lines[n-1] = l
		return lines
	}
}

// lineOffset returns the byte offset of line n (1-based) of the file.
func lineOffset(t *testing.T, path string, n int) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data[off:], '\n')
		if j < 0 {
			t.Fatalf("%s has no line %d", path, n)
		}
		off += int64(j) + 1
	}
	return off
}

// atLines replaces each {N} in s with the offset of line N of the file, as
// the commands print it.
func atLines(t *testing.T, path, s string) string {
	t.Helper()
	re := regexp.MustCompile(`\{(\d+)\}`)
	return re.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(m[1 : len(m)-1])
		return num(lineOffset(t, path, n))
	})
}

// compressed writes src as a seekable .jsonl.zst and returns its path.
func compressed(t *testing.T, src string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(t.TempDir(), filepath.Base(src)+rollout.ZstExt)
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := rollout.WriteZst(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
