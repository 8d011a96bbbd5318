package e2e

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// TestTreeAfterRestart: an agent tree with a fork by reference, a fork by
// copy and a revert, on a served data dir; the coordinator is SIGKILLed and
// restarted; at quiescence the tree rebuilt from the mirror has the same IDs,
// edges and rollout chains as before, the same as one read straight from
// the bus, and the index agrees with it.
func TestTreeAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the coordinator binary")
	}
	bin := coordinatorBin(t)
	dir := t.TempDir()
	c := startChild(t, bin, nil, "serve", "--data", dir, "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0")
	natsAddr, httpAddr := boundAddrs(t, c, dir)
	args := []string{"serve", "--data", dir, "--nats-listen", natsAddr, "--listen", httpAddr} // restarts: the same ports
	waitHealthy(t, c, httpAddr, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nc, err := nats.Connect("nats://"+natsAddr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}

	// The release tree, a paginated thread that is then reverted, and forks.
	if _, err := ops.Import(ctx, bus, "../testdata/examples/release-tree", "e2e", nil); err != nil {
		t.Fatal(err)
	}
	writeTurns(t, ctx, bus, "pag", rollout.HistoryPaginated, "t1", "t2", "t3")
	if _, err := ops.Revert(ctx, bus, "pag", "t2"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []ops.ForkOptions{{Thread: "fork-ref", Mode: ops.ModeReference, AfterTurn: "a1"}, {Thread: "fork-copy", Mode: ops.ModeCopy}} {
		src, err := ops.Load(ctx, bus, "release-A")
		if err != nil {
			t.Fatal(err)
		}
		f.Holder = "e2e"
		if _, err := ops.Fork(ctx, bus, src, f); err != nil {
			t.Fatal(err)
		}
	}

	threads := []string{"release-P", "release-A", "release-B", "pag", "fork-ref", "fork-copy"}
	fromBus, err := ops.CorpusFromBus(ctx, bus, threads...)
	if err != nil {
		t.Fatal(err)
	}
	want := shape(tree.Build(fromBus, tree.Options{}).Roots)
	before := settledTree(t, ctx, bus, dir, len(fromBus.Rollouts))
	if before != want {
		t.Fatalf("the tree from the mirror differs from the bus's:\n%s\n%s", before, want)
	}

	c.kill()
	c = startChild(t, bin, nil, args...)
	waitHealthy(t, c, httpAddr, 60*time.Second)
	after := settledTree(t, ctx, bus, dir, len(fromBus.Rollouts))
	if after != before {
		t.Fatalf("the tree rebuilt after a SIGKILL differs:\nbefore %s\nafter  %s", before, after)
	}

	// The index names the same threads, parents, fork origins and current rollouts.
	r, err := index.OpenReader(ctx, filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	page, err := r.Threads(ctx, index.ThreadQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range page.Threads {
		got = append(got, th.ID+"<"+th.ParentThreadID+"|"+th.ForkedFromID+"|"+th.CurrentRolloutID+">")
	}
	sort.Strings(got)
	wantIdx := nodesOf(tree.Build(fromBus, tree.Options{}).Roots)
	if strings.Join(got, " ") != strings.Join(wantIdx, " ") {
		t.Errorf("the index disagrees with the tree:\nindex %v\ntree  %v", got, wantIdx)
	}
}

// settledTree waits until the mirror holds every rollout the bus holds, then
// builds the tree from the mirror.
func settledTree(t *testing.T, ctx context.Context, bus *stream.Bus, dir string, rollouts int) string {
	t.Helper()
	var s string
	ok := poll(30*time.Second, func() bool {
		c, err := tree.LoadDir(filepath.Join(dir, "rollouts"))
		if err != nil {
			return false
		}
		for id, r := range c.Rollouts {
			tail, err := bus.Tail(ctx, id)
			if err != nil || tail.Ordinal != int64(r.Records) {
				return false
			}
		}
		s = shape(tree.Build(c, tree.Options{}).Roots)
		return len(c.Rollouts) == rollouts
	})
	if !ok {
		t.Fatal("the mirror did not catch up with the bus")
	}
	return s
}

// writeTurns writes a thread of completed turns through a writer.
func writeTurns(t *testing.T, ctx context.Context, bus *stream.Bus, thread, mode string, turns ...string) {
	t.Helper()
	lease, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx) //nolint:errcheck
	w, err := bus.OpenWriter(ctx, lease, "r-"+thread, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := rollout.Builder{}
	recs := []rollout.Record{b.Meta(rollout.SessionMeta{ID: thread, RolloutID: "r-" + thread, Cwd: "/", HistoryMode: mode})}
	for _, id := range turns {
		recs = append(recs, b.TaskStarted(id), b.UserMessage("do "+id), b.Message("assistant", "did "+id), b.TaskComplete(id))
	}
	for _, r := range recs {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Threads().Create(ctx, thread, []byte("r-"+thread)); err != nil {
		t.Fatal(err)
	}
}

func shape(ns []*tree.Node) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, n.ThreadID+"<"+n.ParentThreadID+"|"+n.ForkedFromID+"|"+n.RolloutID+"|"+strings.Join(n.Rollouts, ",")+">("+shape(n.Children)+")")
	}
	return strings.Join(parts, " ")
}

// nodesOf lists the nodes that wrote a line, as the index keys them.
func nodesOf(ns []*tree.Node) []string {
	var out []string
	var walk func([]*tree.Node)
	walk = func(ns []*tree.Node) {
		for _, n := range ns {
			if n.RolloutID != "" {
				out = append(out, n.ThreadID+"<"+n.ParentThreadID+"|"+n.ForkedFromID+"|"+n.RolloutID+">")
			}
			walk(n.Children)
		}
	}
	walk(ns)
	sort.Strings(out)
	return out
}
