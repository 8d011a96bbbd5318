package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// docEnv is the world the docs' examples run in (see TestDocExamples).
type docEnv struct {
	t    *testing.T
	bin  string // the built coordinator
	work string // the current directory of every example
	home string // $HOME
	data string // $HOME/.logbook: the served data dir
	srv  *exec.Cmd
	done chan error
	logs *bytes.Buffer
}

// dataPlaceholders are the data dirs the docs name; each is the served one.
var dataPlaceholders = []string{"/tmp/dd", "/tmp/lb", "/var/lib/logbook", "/srv/logbook", "~/.logbook"}

// newDocEnv builds the binary and the work dir: a copy of testdata/,
// damaged.jsonl (chapter-rollback-1.jsonl with line 12 damaged), notes.txt
// (not a rollout), cold/rollout-A.jsonl.zst (chapter-rollback-1.jsonl
// compressed), and a $HOME with .codex/sessions (the Codex sessions of
// testdata/codex-real) and the data dir .logbook.
func newDocEnv(t *testing.T) *docEnv {
	t.Helper()
	root := t.TempDir()
	e := &docEnv{t: t, work: filepath.Join(root, "work"), home: filepath.Join(root, "home")}
	e.data = filepath.Join(e.home, ".logbook")
	e.bin = filepath.Join(root, "coordinator")
	if out, err := exec.Command("go", "build", "-o", e.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	copyTree(t, "../../testdata", filepath.Join(e.work, "testdata"))
	copyTree(t, "../../testdata/codex-real/sessions", filepath.Join(e.home, ".codex", "sessions"))
	src, err := os.ReadFile(example("chapter-rollback-1"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	writeFile(t, filepath.Join(e.work, "damaged.jsonl"), bytes.Join(corruptLine(12)(lines), nil))
	writeFile(t, filepath.Join(e.work, "notes.txt"), []byte("ship 1.4.2 on friday\n"))
	var zst bytes.Buffer
	if err := rollout.WriteZst(&zst, bytes.NewReader(src)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.work, "cold", "rollout-A.jsonl.zst"), zst.Bytes())
	return e
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		writeFile(t, filepath.Join(to, rel), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// env is the environment of every example: $HOME is the test's, and no
// $LOGBOOK_DATA, so the default data dir is the served one.
func (e *docEnv) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "LOGBOOK_DATA=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+e.home)
}

// run runs the binary in the work dir with stdin empty (not a terminal).
func (e *docEnv) run(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	cmd := exec.Command(e.bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = e.work, e.env(), &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		e.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// startServe starts "coordinator serve" on dir with both listeners on port
// 0 and waits for its nats.url; extra are more flags.
func (e *docEnv) startServe(dir string, extra ...string) (*exec.Cmd, chan error, *bytes.Buffer) {
	e.t.Helper()
	var logs bytes.Buffer
	args := append([]string{"serve", "--data", dir, "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(e.bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = e.work, e.env(), &logs, &logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	e.t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(datadir.URLPath(dir)); err == nil {
			return cmd, done, &logs
		}
		select {
		case err := <-done:
			e.t.Fatalf("coordinator serve --data %s exited before serving: %v\n%s", dir, err, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("coordinator serve --data %s wrote no nats.url in 30s\n%s", dir, logs.String())
		}
	}
}

// stopServe stops a serve with SIGTERM: it must exit 0 and take its
// nats.url with it.
func (e *docEnv) stopServe(dir string, cmd *exec.Cmd, done chan error, logs *bytes.Buffer) {
	e.t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			e.t.Errorf("coordinator serve --data %s after SIGTERM: %v\n%s", dir, err, logs.String())
		}
	case <-time.After(30 * time.Second):
		e.t.Fatalf("coordinator serve --data %s did not stop within 30s of SIGTERM", dir)
	}
	if _, err := os.Stat(datadir.URLPath(dir)); !errors.Is(err, os.ErrNotExist) {
		e.t.Errorf("a clean stop left %s (%v)", datadir.URLPath(dir), err)
	}
}

// serving makes the served data dir's coordinator run (on) or not.
func (e *docEnv) serving(on bool) {
	e.t.Helper()
	switch {
	case on && e.srv == nil:
		e.srv, e.done, e.logs = e.startServe(e.data)
	case !on && e.srv != nil:
		e.stopServe(e.data, e.srv, e.done, e.logs)
		e.srv = nil
	}
}

// importAll publishes testdata/examples and testdata/codex-real into the
// served data dir and waits until its mirror and index hold all of it.
func (e *docEnv) importAll() {
	e.t.Helper()
	e.serving(true)
	for _, dir := range []string{"testdata/examples", "testdata/codex-real"} {
		if out, stderr, code := e.run("import", dir); code != exitOK {
			e.t.Fatalf("import %s: exit %d\n%s%s", dir, code, out, stderr)
		}
	}
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, stderr, _ := e.run("verify", "--data", e.data, "--json")
		var v struct {
			OK    bool `json:"ok"`
			Index struct {
				Rollouts int
				Lagging  []json.RawMessage
			} `json:"index"`
			Bus struct{ Behind int } `json:"bus"`
		}
		if json.Unmarshal([]byte(out), &v) == nil && v.OK && v.Index.Rollouts == 14 && len(v.Index.Lagging) == 0 && v.Bus.Behind == 0 {
			return
		}
		last = out + stderr
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("the served data dir did not catch up with the imports in 30s:\n%s", last)
}
