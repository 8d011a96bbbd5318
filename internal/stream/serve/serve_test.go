package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
)

func quiet() *slog.Logger {
	if os.Getenv("LOGBOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start runs the coordinator in-process until the returned stop is called.
func start(t *testing.T, cfg Config) (Info, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Info, 1)
	cfg.Ready = func(i Info) { ready <- i }
	cfg.Logger = quiet()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	select {
	case i := <-ready:
		stopped := false
		stop := func() error {
			if stopped {
				return nil
			}
			stopped = true
			cancel()
			return <-done
		}
		t.Cleanup(func() { _ = stop() })
		return i, stop
	case err := <-done:
		cancel()
		t.Fatalf("serve did not start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("serve did not start in 60s")
	}
	return Info{}, nil
}

func TestServeInProcess(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0"}
	info, stop := start(t, cfg)
	if strings.HasSuffix(info.NATSURL, ":4222") {
		t.Fatalf("port 0 bound the default port: %s", info.NATSURL)
	}
	b, err := os.ReadFile(datadir.URLPath(dir))
	if err != nil || strings.TrimSpace(string(b)) != info.NATSURL {
		t.Fatalf("nats.url holds %q (%v), want %s", b, err, info.NATSURL)
	}
	resp, err := http.Get("http://" + info.HTTPAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	if info.RecordLimit < 8<<20-16<<10 {
		t.Fatalf("record limit %d: the embedded server's max payload was not raised", info.RecordLimit)
	}

	// A second coordinator on the same data dir fails, naming the holder.
	err = Run(context.Background(), Config{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0", Logger: quiet()})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("second serve: %v", err)
	}
	t.Log(err)

	// Clean stop releases everything; a restart on the same dir finds the
	// streams (setup is idempotent).
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + info.HTTPAddr + "/healthz"); err == nil {
		t.Fatal("HTTP still served after stop")
	}
	_, stop = start(t, cfg)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	err := Run(context.Background(), Config{DataDir: t.TempDir(), Replicas: 3, Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "--nats") {
		t.Fatalf("replicas without a cluster: %v", err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	err = Run(context.Background(), Config{DataDir: t.TempDir(), NATSListen: busy.Addr().String(), Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "cannot listen") {
		t.Fatalf("busy NATS port: %v", err)
	}

	// A busy HTTP port is refused before anything starts: no store, no
	// nats.url pointing at a server that is gone.
	dir := t.TempDir()
	err = Run(context.Background(), Config{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: busy.Addr().String(), Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "--listen") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("busy HTTP port: %v", err)
	}
	for _, name := range []string{datadir.NATSURL, "nats"} {
		if _, serr := os.Stat(filepath.Join(dir, name)); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("busy HTTP port left %s behind (%v)", name, serr)
		}
	}

	// --nats where nothing listens: "connection refused" within seconds,
	// not a setup timeout a minute later.
	// Port 1 (tcpmux) is privileged and unused on loopback: refused at once.
	nowhere := "127.0.0.1:1"
	t0 := time.Now()
	err = Run(context.Background(), Config{DataDir: t.TempDir(), NATSURL: "nats://" + nowhere, Listen: "127.0.0.1:0", Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "--nats") {
		t.Fatalf("--nats to nowhere: %v", err)
	}
	if d := time.Since(t0); d > 2*stream.ConnectTimeout+time.Second {
		t.Fatalf("--nats to nowhere took %v", d)
	}
}

// TestServeCleanStopRemovesURL: nats.url and http.url name the addresses
// a live coordinator bound (port 0 resolved), or are absent.
func TestServeCleanStopRemovesURL(t *testing.T) {
	dir := t.TempDir()
	info, stop := start(t, Config{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0"})
	for path, want := range map[string]string{datadir.URLPath(dir): info.NATSURL, datadir.HTTPURLPath(dir): "http://" + info.HTTPAddr} {
		raw, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(raw)) != want || strings.HasSuffix(want, ":0") {
			t.Fatalf("%s holds %q (%v), want %q", filepath.Base(path), raw, err, want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{datadir.URLPath(dir), datadir.HTTPURLPath(dir)} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("clean stop left %s behind (%v)", filepath.Base(path), err)
		}
	}
}

// TestServeExternalNATS: with --nats nothing is embedded, the record limit
// comes from that server's max payload, and a mismatching stream there is a
// one-line error.
func TestServeExternalNATS(t *testing.T) {
	// Someone else's server, with NATS's default max payload (1 MiB).
	ns := externalNATS(t, "ext")
	dir := t.TempDir()
	info, stop := start(t, Config{DataDir: dir, NATSURL: ns.ClientURL(), Listen: "127.0.0.1:0"})
	if info.NATSURL != ns.ClientURL() || info.RecordLimit != stream.MaxRecord(1<<20) {
		t.Fatalf("info %+v", info)
	}
	if _, err := os.Stat(filepath.Join(dir, "nats")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a store was created in the data dir: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.Stream(ctx, stream.StreamRollouts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = 1 << 30
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	err = Run(ctx, Config{DataDir: dir, NATSURL: ns.ClientURL(), Listen: "127.0.0.1:0", Logger: quiet()})
	if !errors.Is(err, stream.ErrConfigMismatch) || !strings.Contains(err.Error(), "stream ROLLOUTS has max bytes") {
		t.Fatalf("mismatching ROLLOUTS: %v", err)
	}
}

// externalNATS starts "someone else's" JetStream server (NATS's default max
// payload, 1 MiB) on an OS-chosen port; it stops with the test.
func externalNATS(t *testing.T, name string) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{ServerName: name, Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return ns
}

// TestServeStopClosesFiles: a clean stop closes every file the coordinator
// opened in its data dir (the store, the index, the mirror's watermark
// file): after each stop no descriptor of the process points into it.
func TestServeStopClosesFiles(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to list open files")
	}
	dir := t.TempDir()
	cfg := Config{DataDir: dir, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0"}
	for range 2 {
		_, stop := start(t, cfg)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir) {
				t.Errorf("still open after a clean stop: %s", target)
			}
		}
	}
}
