package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// buildCoordinator builds the real binary once per test.
func buildCoordinator(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	bin := filepath.Join(t.TempDir(), "coordinator")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/logbook-agents/logbook/cmd/coordinator")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type child struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

func startChild(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		c.done <- nil
	})
	return c
}

// waitHealthy polls the HTTP health endpoint.
func waitHealthy(t *testing.T, c *child, httpAddr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-c.done:
			c.done <- err
			t.Fatalf("coordinator exited: %v\n%s", err, c.stderr)
		default:
		}
		if resp, err := httpGet("http://" + httpAddr + "/healthz"); err == nil && resp == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator not healthy after 60s\n%s", c.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeBinarySIGKILL runs `coordinator serve` as a child process,
// SIGKILLs it while writers in this process publish through it, restarts it
// on the same data dir, and checks that every record acknowledged before the
// kill is on the bus. It also checks the data dir lock and a clean SIGTERM.
func TestServeBinarySIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the coordinator binary")
	}
	bin := buildCoordinator(t)
	dir := t.TempDir()
	// The OS picks the ports; the restart below takes the same ones again,
	// so the writers' connections find the bus where it was.
	c := startChild(t, bin, "serve", "--data", dir, "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0")
	natsAddr, httpAddr := boundAddrs(t, dir)
	args := []string{"serve", "--data", dir, "--nats-listen", natsAddr, "--listen", httpAddr}
	waitHealthy(t, c, httpAddr)

	// The lock: a second coordinator on the same dir fails with one line.
	var errb bytes.Buffer
	second := exec.Command(bin, "serve", "--data", dir, "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0")
	second.Stderr = &errb
	err := second.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || strings.Count(errb.String(), "\n") != 1 ||
		!strings.Contains(errb.String(), fmt.Sprintf("held by coordinator pid %d", c.cmd.Process.Pid)) {
		t.Fatalf("second serve: %v, stderr %q", err, errb.String())
	}
	t.Logf("second serve: %s", strings.TrimSpace(errb.String()))

	url, err := os.ReadFile(datadir.URLPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const writers = 4
	ws := make([]*crashWriter, writers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range ws {
		ws[i] = newCrashWriter(t, ctx, strings.TrimSpace(string(url)), fmt.Sprintf("crash-%d", i))
		wg.Add(1)
		go func(w *crashWriter) { defer wg.Done(); w.run(ctx, stop) }(ws[i])
	}
	progress := func(more int64, base []int64) func() bool {
		return func() bool {
			for i, w := range ws {
				if w.w.Acked() < base[i]+more {
					return false
				}
			}
			return true
		}
	}
	acked := func() []int64 {
		out := make([]int64, writers)
		for i, w := range ws {
			out[i] = w.w.Acked()
		}
		return out
	}
	poll(t, 60*time.Second, "writers to publish", progress(200, make([]int64, writers)))

	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done
	c.done <- nil
	before := acked()
	killed := time.Now()

	c2 := startChild(t, bin, args...)
	waitHealthy(t, c2, httpAddr)
	poll(t, 60*time.Second, "writers to publish again", progress(100, before))
	t.Logf("SIGKILL with %v acknowledged; restarted and publishing again after %s", before, time.Since(killed).Round(time.Millisecond))
	close(stop)
	wg.Wait()

	nc, err := nats.Connect(strings.TrimSpace(string(url)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		if w.err != nil {
			t.Fatalf("writer %d: %v", i, w.err)
		}
		es, err := bus.ReadAll(ctx, w.rid, 1)
		if err != nil {
			t.Fatal(err)
		}
		a := w.w.Acked()
		if a < before[i] || int64(len(es)) < a {
			t.Fatalf("writer %d: %d stored, %d acknowledged (%d before the kill)", i, len(es), a, before[i])
		}
		for ord := int64(1); ord <= a; ord++ {
			e := es[ord-1]
			if e.Ordinal != ord || !bytes.Equal(append(bytes.Clone(e.Record.Raw), '\n'), w.lines[ord]) {
				t.Fatalf("writer %d ordinal %d: acknowledged record not on the bus", i, ord)
			}
		}
	}

	for _, w := range ws {
		if err := w.w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// SIGTERM: a clean stop, exit 0.
	if err := c2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c2.done:
		c2.done <- err
		if err != nil || !strings.Contains(c2.stderr.String(), "embedded nats-server stopped") {
			t.Fatalf("SIGTERM: %v\n%s", err, c2.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30s after SIGTERM")
	}
}

// crashWriter appends and flushes in a loop, remembering its lines.
type crashWriter struct {
	rid   string
	w     *stream.Writer
	lease *stream.Lease
	lines map[int64][]byte
	err   error
}

func newCrashWriter(t *testing.T, ctx context.Context, url, thread string) *crashWriter {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: "crash-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.Release(cctx)
	})
	w, err := bus.OpenWriter(ctx, l, thread, stream.WriterOptions{PublishTimeout: 500 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = w.Close(cctx)
	})
	return &crashWriter{rid: thread, w: w, lease: l, lines: map[int64][]byte{}}
}

func (c *crashWriter) run(ctx context.Context, stop <-chan struct{}) {
	add := func(r rollout.Record) bool {
		ord, err := c.w.Append(ctx, r)
		if err != nil {
			c.err = err
			return false
		}
		r.Ordinal, r.CRC = ord, rollout.Checksum(r.Payload)
		c.lines[ord] = r.Encode()
		return true
	}
	meta := rollout.New(time.Now(), 0, rollout.TypeSessionMeta, rollout.MustJSON(rollout.SessionMeta{
		ID: c.rid, RolloutID: c.rid, Source: rollout.Source{Kind: "sim"}, Cwd: "/"}))
	if !add(meta) {
		return
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			c.err = c.w.Flush(ctx)
			return
		default:
		}
		r := rollout.New(time.Now(), 0, rollout.TypeResponseItem,
			rollout.MessageItem("assistant", fmt.Sprintf("%s record %d %s", c.rid, n, strings.Repeat("x", 200))))
		if !add(r) {
			return
		}
		if n%8 == 7 {
			_ = c.w.Flush(ctx) // fails while the coordinator is down; the records are kept
		}
	}
}

func poll(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func httpGet(url string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// boundAddrs reads the addresses a coordinator serving dir bound, once it
// has written them (port 0 resolved), as host:port.
func boundAddrs(t *testing.T, dir string) (natsAddr, httpAddr string) {
	t.Helper()
	read := func(path, scheme string) string {
		raw, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(raw, []byte("\n")) {
			return ""
		}
		return strings.TrimPrefix(strings.TrimSpace(string(raw)), scheme)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		natsAddr, httpAddr = read(datadir.URLPath(dir), "nats://"), read(datadir.HTTPURLPath(dir), "http://")
		if natsAddr != "" && httpAddr != "" {
			return natsAddr, httpAddr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator serving %s never wrote the addresses it bound", dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
