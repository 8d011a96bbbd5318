package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// Listening beyond loopback without credentials is refused before anything
// starts: exit 1, one line naming the flag to set, the data dir untouched.
func TestServeRefusesExposure(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--nats-listen", "0.0.0.0:0", "--listen", "127.0.0.1:0"}, []string{"--nats-listen 0.0.0.0:0", "not a loopback", "--auth FILE"}},
		{[]string{"--nats-listen", ":0", "--listen", "127.0.0.1:0"}, nil}, // ":0" is 127.0.0.1 for the embedded server: allowed
		{[]string{"--nats-listen", "127.0.0.1:0", "--listen", "0.0.0.0:0"}, []string{"--listen 0.0.0.0:0", "not a loopback", "--http-token FILE"}},
		{[]string{"--nats-listen", "127.0.0.1:0", "--listen", ":0"}, []string{"--listen :0", "--http-token FILE"}},
	} {
		if c.want == nil {
			continue
		}
		data := filepath.Join(t.TempDir(), "data")
		r := runCLI(t, append([]string{"serve", "--data", data}, c.args...)...)
		r.wantCode(t, exitFailure)
		r.wantOneLineError(t, c.want...)
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("%v: the data dir was created (%v)", c.args, err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a goroutine writing and a test
// reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serving is a `coordinator serve` run in-process.
type serving struct {
	data, url, http string
	stderr          *syncBuffer
}

func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	s := &serving{data: t.TempDir(), stderr: &syncBuffer{}}
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, newRootCmd(out, s.stderr), append([]string{"serve", "--data", s.data}, args...))
	}()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if i := strings.Index(out.String(), "http: http://"); i >= 0 && strings.HasSuffix(out.String(), "\n") {
			s.http = strings.TrimSpace(out.String()[i+len("http: http://"):])
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s", code, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, err := os.ReadFile(datadir.URLPath(s.data))
	if err != nil {
		t.Fatal(err)
	}
	s.url = strings.TrimSpace(string(b))
	return s
}

func httpStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// With --auth and --http-token, serve listens on every interface; only
// users of the users file get in, each with its role: the operator runs the
// writing commands, an agent cannot, a stranger cannot connect; commands
// run through the data dir use its local key.
func TestServeWithCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator")
	}
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	op, agent := filepath.Join(dir, "op.nk"), filepath.Join(dir, "agent.nk")
	runCLI(t, "credentials", "new", "--role", "operator", "--name", "op", "--out", op, "--auth", users).wantOut(t, "user op (operator)", "added to "+users)
	runCLI(t, "credentials", "new", "--role", "agent", "--name", "a1", "--out", agent, "--auth", users).wantCode(t, exitOK)
	if fi, err := os.Stat(op); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v %v", fi, err)
	}
	token := "0123456789abcdef0123456789abcdef"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--nats-listen", "0.0.0.0:0", "--listen", "0.0.0.0:0", "--auth", users, "--http-token", tokenFile)
	if fi, err := os.Stat(datadir.KeyPath(s.data)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("local key: %v %v", fi, err)
	}
	_, port, _ := strings.Cut(s.http, ":")
	health := "http://127.0.0.1:" + port[strings.LastIndex(port, ":")+1:] + "/healthz"
	if code := httpStatus(t, health, ""); code != http.StatusUnauthorized {
		t.Errorf("healthz without the token: %d", code)
	}
	if code := httpStatus(t, health, "wrong-token-wrong-token"); code != http.StatusUnauthorized {
		t.Errorf("healthz with a wrong token: %d", code)
	}
	if code := httpStatus(t, health, token); code != http.StatusOK {
		t.Errorf("healthz with the token: %d", code)
	}

	// A stranger is refused at connect.
	runCLI(t, "gc", "--nats", s.url, "--dry-run", "--timeout", "5s").wantOneLineError(t, "Authorization")
	// The operator runs the writing commands.
	opArgs := []string{"--nats", s.url, "--nkey", op}
	cli := func(args ...string) cliResult { return runCLI(t, append(args, opArgs...)...) }
	cli("import", "../../testdata/codex-real").wantOut(t, "6 files: 4,760 records published")
	const codex = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"
	cli("fork", codex, "--after-turn", "019c8a5a-2f22-7500-86a3-35cefafbe84e", "--mode", "reference", "--thread", "child").wantCode(t, exitOK)
	cli("rollback", codex, "1").wantOut(t, "Rolled back thread "+codex)
	const crashed = "019c8a70-dda7-7f33-98ea-f30553347322"
	cli("reconcile", crashed, "--call", "call_UtYwHmwWekzvq83m8Rb9K8jJ", "--outcome", "executed", "--evidence", "seen").wantCode(t, exitOK)
	cli("resume", crashed).wantOut(t, "recorded as turn_aborted{stale_after_crash}")
	cli("gc", "--dry-run").wantOut(t, "Would remove (dry run): 0 rollouts")
	// Through the data dir, without flags: the local key.
	runCLI(t, "gc", "--data", s.data, "--dry-run").wantOut(t, "Would remove (dry run): 0 rollouts")
	// The coordinator's own identity mirrors it all: verify --data (on the
	// local key) finds bus, mirror and index equal once the mirror caught up.
	deadline := time.Now().Add(60 * time.Second)
	for {
		v := runCLI(t, "verify", "--data", s.data)
		if v.code == exitOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("verify --data never passed:\n%s%s\nserve:\n%s", v.stdout, v.stderr, s.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(s.stderr.String(), "Permissions Violation") {
		t.Errorf("the coordinator hit a permission violation:\n%s", s.stderr)
	}
	// An agent cannot write THREADS: a fork is denied (the server answers a
	// denied publish with silence: the command fails at its timeout, its
	// log says "Permissions Violation").
	r := runCLI(t, "fork", codex, "--mode", "reference", "--thread", "child2", "--nats", s.url, "--nkey", agent, "--timeout", "4s")
	if r.code != exitFailure || !strings.Contains(r.stderr, "THREADS child2") {
		t.Errorf("fork with agent credentials: exit %d\n%s", r.code, r.stderr)
	}
}
