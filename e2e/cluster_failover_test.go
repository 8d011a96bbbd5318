package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/natstest"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestImportRidesLeaderFailover: `coordinator serve --replicas 3` on a
// three-node cluster, `coordinator import` of a few hundred rollouts, the
// ROLLOUTS stream leader shut down hard a moment into the import. The import
// completes (exit 0) and every rollout is on the bus.
func TestImportRidesLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster and the coordinator binary")
	}
	if os.Getenv("LOGBOOK_FAILOVER") == "" {
		// Passes on an idle machine, but once in about seven runs under
		// load the import stalls past its 50 s timeout after the failover
		// (issue 8, item 15, still open); `make failover` runs it.
		t.Skip("set LOGBOOK_FAILOVER=1 (make failover) to run the leader-failover test")
	}
	bin := coordinatorBin(t)
	nodes := startCluster(t)
	var urls []string
	for _, ns := range nodes {
		urls = append(urls, ns.ClientURL())
	}
	natsURL := strings.Join(urls, ",")

	src := t.TempDir()
	const n = 300
	for s := int64(1); s <= n; s++ {
		id := fmt.Sprintf("failover-%d", s)
		recs := gen.All(gen.Config{Seed: s, Records: 20 + int(s%5)*4})
		if err := os.WriteFile(filepath.Join(src, id+".jsonl"), rollout.MemOf(id, recs).Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	srv := startChild(t, bin, nil, "serve", "--data", dir, "--nats", natsURL, "--replicas", "3", "--listen", "127.0.0.1:0")
	if !poll(60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "nats.url"))
		return err == nil || srv.exited()
	}) || srv.exited() {
		t.Fatalf("coordinator not serving: %v\n%s", srv.err, srv.stderr)
	}

	nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	info := func() *jetstream.StreamInfo {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream.StreamRollouts)
		if err != nil {
			return nil
		}
		return s.CachedInfo()
	}

	impURL := natsURL
	if os.Getenv("XFO_URL") == "leader" {
		impURL = nodes[info().Cluster.Leader].ClientURL()
	}
	at := uint64(50)
	if v := os.Getenv("XFO_AT"); v != "" {
		fmt.Sscan(v, &at)
	}
	start := time.Now()
	imp := startChild(t, bin, nil, "import", "--nats", impURL, "--timeout", "50s", src)
	if !poll(30*time.Second, func() bool {
		i := info()
		return imp.exited() || (i != nil && i.State.Msgs >= at)
	}) {
		t.Fatalf("import published nothing\n%s", imp.stderr)
	}
	if imp.exited() {
		t.Fatalf("import finished before the leader could be killed (%v); make the set larger\n%s", imp.err, imp.stderr)
	}
	i := info()
	leader := i.Cluster.Leader
	nodes[leader].Shutdown()
	nodes[leader].WaitForShutdown()
	t.Logf("shut down ROLLOUTS leader %s at %d messages, %v into the import", leader, i.State.Msgs, time.Since(start).Round(time.Millisecond))

	select {
	case <-imp.done:
	case <-time.After(40 * time.Second):
		// Hung: dump its goroutines (SIGQUIT) so the failure says where.
		_ = imp.cmd.Process.Signal(syscall.SIGQUIT)
		<-imp.done
		t.Fatalf("import still running 40s after the leader was killed; its goroutines:\n%s", imp.stderr)
	}
	if imp.err != nil {
		t.Fatalf("import: %v\n%s", imp.err, imp.stderr)
	}
	t.Logf("import done in %v", time.Since(start).Round(time.Millisecond))
	if os.Getenv("XFO_LOG") != "" {
		t.Logf("import stderr:\n%s", imp.stderr)
	}

	// Every rollout is on the bus under the new leader.
	var subjects int
	if !poll(20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream.StreamRollouts)
		if err != nil {
			return false
		}
		si, err := s.Info(ctx, jetstream.WithSubjectFilter("rollout.>"))
		if err != nil {
			return false
		}
		subjects = len(si.State.Subjects)
		return subjects == n
	}) {
		t.Fatalf("%d of %d rollouts on the bus after the import", subjects, n)
	}
	// The serving coordinator's mirror and index catch up under the new
	// leader, and verify --data finds bus, mirror and index equal.
	var out []byte
	if !poll(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		out, err = exec.CommandContext(ctx, bin, "verify", "--data", dir).CombinedOutput()
		return err == nil
	}) {
		t.Fatalf("verify --data after the failover never passed:\n%s\ncoordinator:\n%s", out, srv.stderr)
	}
	if os.Getenv("XFO_LOG") != "" {
		t.Logf("verify passed %v after start; serve stderr:\n%s", time.Since(start).Round(time.Millisecond), srv.stderr)
	}
}

// startCluster starts three in-process JetStream nodes on OS-chosen ports.
func startCluster(t *testing.T) map[string]*server.Server {
	t.Helper()
	return natstest.StartCluster(t, 3, stream.EmbeddedMaxPayload).Nodes
}
