package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// coordinatorBin builds cmd/coordinator once per test binary.
func coordinatorBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "logbook-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "coordinator")
		out, err := exec.Command(gobin, "build", "-o", binPath, "github.com/logbook-agents/logbook/cmd/coordinator").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// child is a coordinator process.
type child struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error // valid once done is closed
}

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

func startChild(t testing.TB, bin string, env []string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { c.kill() })
	return c
}

// kill SIGKILLs the child and waits for it.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// killedBySignal reports whether the child died of SIGKILL.
func (c *child) killedBySignal() bool {
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// waitHealthy polls /healthz until it answers 200.
func waitHealthy(t testing.TB, c *child, httpAddr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if c.exited() {
			t.Fatalf("coordinator exited: %v\n%s", c.err, c.stderr)
		}
		if code, _ := httpGet("http://" + httpAddr + "/healthz"); code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator not healthy after %s\n%s", d, c.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpGet(url string) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// boundAddrs waits until the coordinator c, serving dir, has written the
// addresses it bound (DIR/nats.url, DIR/http.url: port 0 resolved) and
// returns them as host:port. The files must not be there from an earlier
// run: start from a fresh dir, or remove them first (removeAddrs).
func boundAddrs(t testing.TB, c *child, dir string) (natsAddr, httpAddr string) {
	t.Helper()
	read := func(name, scheme string) string {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.HasSuffix(raw, []byte("\n")) {
			return ""
		}
		return strings.TrimPrefix(strings.TrimSpace(string(raw)), scheme)
	}
	if !poll(60*time.Second, func() bool {
		natsAddr, httpAddr = read("nats.url", "nats://"), read("http.url", "http://")
		return natsAddr != "" && httpAddr != "" || c.exited()
	}) || c.exited() {
		t.Fatalf("coordinator did not write the addresses it bound: %v\n%s", c.err, c.stderr)
	}
	return natsAddr, httpAddr
}

// removeAddrs removes the address files a killed coordinator left behind.
func removeAddrs(dir string) {
	os.Remove(filepath.Join(dir, "nats.url"))
	os.Remove(filepath.Join(dir, "http.url"))
}

// poll waits for cond with a deadline; it returns false on timeout.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func quiet() *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// decompress reads a whole .jsonl.zst.
func decompress(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return io.ReadAll(dec)
}
