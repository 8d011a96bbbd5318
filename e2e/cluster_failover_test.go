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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/natstest"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// failoverCluster is a three-node cluster, a coordinator serving it with
// --replicas 3, n rollout files to import, and a client to watch ROLLOUTS.
type failoverCluster struct {
	t       *testing.T
	bin     string
	c       *natstest.Cluster
	url     string
	src     string // the files to import
	dataDir string
	srv     *child
	js      jetstream.JetStream
}

func startFailoverCluster(t *testing.T, n int) *failoverCluster {
	t.Helper()
	f := &failoverCluster{t: t, bin: coordinatorBin(t)}
	f.c = natstest.StartCluster(t, 3, stream.EmbeddedMaxPayload)
	f.url = f.c.URLs()

	f.src = t.TempDir()
	for s := int64(1); s <= int64(n); s++ {
		id := fmt.Sprintf("failover-%d", s)
		recs := gen.All(gen.Config{Seed: s, Records: 20 + int(s%5)*4})
		if err := os.WriteFile(filepath.Join(f.src, id+".jsonl"), rollout.MemOf(id, recs).Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	f.dataDir = t.TempDir()
	f.srv = startChild(t, f.bin, nil, "serve", "--data", f.dataDir, "--nats", f.url, "--replicas", "3", "--listen", "127.0.0.1:0")
	_, httpAddr := boundAddrs(t, f.srv, f.dataDir)
	waitHealthy(t, f.srv, httpAddr, 60*time.Second)

	nc, err := nats.Connect(f.url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	f.js, _ = jetstream.New(nc)
	return f
}

// info is ROLLOUTS' info, or nil when it cannot be read now.
func (f *failoverCluster) info() *jetstream.StreamInfo {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, stream.StreamRollouts)
	if err != nil {
		return nil
	}
	return s.CachedInfo()
}

// startImport starts `coordinator import` of every file and waits until
// ROLLOUTS holds at least msgs messages, the import still running.
func (f *failoverCluster) startImport(msgs uint64) *child {
	t := f.t
	t.Helper()
	imp := startChild(t, f.bin, nil, "import", "--nats", f.url, "--timeout", "50s", f.src)
	if !poll(30*time.Second, func() bool {
		i := f.info()
		return imp.exited() || (i != nil && i.State.Msgs >= msgs)
	}) {
		t.Fatalf("import published nothing\n%s", imp.stderr)
	}
	if imp.exited() {
		t.Fatalf("import finished before the nodes could be stopped (%v); make the set larger\n%s", imp.err, imp.stderr)
	}
	return imp
}

// waitExit waits up to d for the child, dumping its goroutines (SIGQUIT)
// when it is still running, so the failure says where it hangs.
func waitExit(t *testing.T, c *child, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(d):
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		<-c.done
		t.Fatalf("%s still running after %s; its goroutines:\n%s", what, d, c.stderr)
	}
}

// TestImportRidesLeaderFailover: `coordinator serve --replicas 3` on a
// three-node cluster, `coordinator import` of a few hundred rollouts, the
// ROLLOUTS stream leader shut down hard a moment into the import. The import
// completes (exit 0), every rollout is on the bus, and verify --data finds
// bus, mirror and index equal.
func TestImportRidesLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster and the coordinator binary")
	}
	const n = 300
	f := startFailoverCluster(t, n)
	start := time.Now()
	imp := f.startImport(50)
	i := f.info()
	if i == nil || i.Cluster == nil {
		t.Fatal("no ROLLOUTS cluster info")
	}
	leader := i.Cluster.Leader
	f.c.Kill(leader)
	t.Logf("shut down ROLLOUTS leader %s at %d messages, %v into the import", leader, i.State.Msgs, time.Since(start).Round(time.Millisecond))

	waitExit(t, imp, 40*time.Second, "import, 40s after the leader was shut down,")
	if imp.err != nil {
		t.Fatalf("import: %v\n%s", imp.err, imp.stderr)
	}
	t.Logf("import done in %v", time.Since(start).Round(time.Millisecond))

	// Every rollout is on the bus under the new leader.
	var subjects int
	if !poll(20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := f.js.Stream(ctx, stream.StreamRollouts)
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
		out, err = exec.CommandContext(ctx, f.bin, "verify", "--data", f.dataDir).CombinedOutput()
		return err == nil
	}) {
		t.Fatalf("verify --data after the failover never passed:\n%s\ncoordinator:\n%s", out, f.srv.stderr)
	}
	t.Logf("verify --data clean %v after the import started", time.Since(start).Round(time.Millisecond))
}

// TestImportFailsWhenQuorumLost: two of three nodes (the ROLLOUTS leader
// among them) shut down under an import. No quorum is left, so nothing can
// be written: the import exits non-zero within a bounded time (the lease
// TTL and the bus's unavailability bound, well inside its --timeout) with
// one line on stderr saying the bus is unavailable, and does not try the
// files left one by one.
func TestImportFailsWhenQuorumLost(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster and the coordinator binary")
	}
	f := startFailoverCluster(t, 300)
	imp := f.startImport(50)
	i := f.info()
	if i == nil || i.Cluster == nil {
		t.Fatal("no ROLLOUTS cluster info")
	}
	stopped := []string{i.Cluster.Leader}
	for _, r := range i.Cluster.Replicas {
		if len(stopped) < 2 {
			stopped = append(stopped, r.Name)
		}
	}
	lost := time.Now()
	for _, name := range stopped {
		f.c.Kill(name)
	}
	t.Logf("shut down %v at %d messages", stopped, i.State.Msgs)

	// Lease TTL 15 s + one call timeout, or the bus's unavailability bound
	// (20 s) + one call timeout, with room for a loaded machine.
	const bound = 40 * time.Second
	waitExit(t, imp, bound+10*time.Second, "import without quorum")
	took := time.Since(lost)
	if imp.err == nil {
		t.Fatalf("import without quorum exited 0\n%s", imp.stderr)
	}
	if took > bound {
		t.Fatalf("import without quorum took %v to fail (bound %v)\n%s", took.Round(time.Millisecond), bound, imp.stderr)
	}
	var last string
	for _, l := range strings.Split(strings.TrimSpace(imp.stderr.String()), "\n") {
		if strings.HasPrefix(l, "coordinator: ") {
			last = l
		}
	}
	if !strings.Contains(last, "bus unavailable") || !strings.Contains(last, "the bus stopped answering") {
		t.Fatalf("import without quorum: want one line saying the bus is unavailable, got %q\nstderr:\n%s", last, imp.stderr)
	}
	t.Logf("failed after %v: %s", took.Round(time.Millisecond), last)
}
