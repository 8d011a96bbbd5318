package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/natstest"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// testCluster is three nats-servers with JetStream clustered on loopback.
type testCluster struct {
	t     *testing.T
	nodes map[string]*server.Server
	urls  []string
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	cl := natstest.StartCluster(t, 3, EmbeddedMaxPayload)
	return &testCluster{t: t, nodes: cl.Nodes, urls: strings.Split(cl.URLs(), ",")}
}

func (c *testCluster) url() string { return strings.Join(c.urls, ",") }

// setup retries Setup until the cluster has a JetStream meta leader.
func (c *testCluster) setup(cfg SetupConfig) {
	c.t.Helper()
	nc := connect(c.t, c.url())
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	waitFor(c.t, 60*time.Second, "the cluster to accept R3 streams", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return Setup(ctx, js, cfg) == nil
	})
}

func (c *testCluster) kill(name string) {
	ns := c.nodes[name]
	ns.Shutdown()
	ns.WaitForShutdown()
	delete(c.nodes, name)
}

func TestFencingCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: skipped with -short")
	}
	c := startCluster(t)
	start := time.Now()
	c.setup(SetupConfig{Replicas: 3, LeaseTTL: fenceLeaseTTL})
	t.Logf("cluster ready in %s", time.Since(start).Round(time.Millisecond))
	busA := openBus(t, connect(t, c.url()), SetupConfig{Replicas: 3, LeaseTTL: fenceLeaseTTL})
	busB := openBus(t, connect(t, c.url()), SetupConfig{Replicas: 3, LeaseTTL: fenceLeaseTTL})
	if cfg := mustStream(t, busA, StreamRollouts).Config; cfg.Replicas != 3 {
		t.Fatalf("ROLLOUTS has %d replicas", cfg.Replicas)
	}
	t.Run("zombie-resumer-race", func(t *testing.T) {
		for i := 0; i < raceRounds(); i++ {
			raceZombieResumer(t, busA, busB, id("race-th", i), id("race-ro", i))
		}
	})
	t.Run("retry-landed", func(t *testing.T) { retryLanded(t, busA, "r3") })
	t.Run("dedupe-trap", func(t *testing.T) { dedupeTrap(t, busA, true) })
	t.Run("leader-killed", func(t *testing.T) { leaderKilled(t, c) })
	t.Run("quorum-lost", func(t *testing.T) { quorumLost(t, c) })
}

// quorumLost: with one node of three left, a lease create neither hangs nor
// retries past its caller's deadline; it fails with ErrBusUnavailable.
func quorumLost(t *testing.T, c *testCluster) {
	bus := openBus(t, connect(t, c.url()), SetupConfig{Replicas: 3, LeaseTTL: fenceLeaseTTL})
	for len(c.nodes) > 1 {
		for name := range c.nodes {
			c.kill(name)
			break
		}
	}
	const deadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := bus.TakeLease(ctx, "quorum-lost-th", LeaseOptions{Holder: "t"})
	elapsed := time.Since(start)
	if !errors.Is(err, ErrBusUnavailable) {
		t.Fatalf("TakeLease without quorum: %v, want ErrBusUnavailable", err)
	}
	if elapsed > 3*deadline {
		t.Fatalf("TakeLease without quorum took %v (deadline %v)", elapsed, deadline)
	}
	t.Logf("failed after %v: %v", elapsed.Round(time.Millisecond), err)
}

func mustStream(t *testing.T, b *Bus, name string) *jetstream.StreamInfo {
	t.Helper()
	s, err := b.js.Stream(ctxT(t, 10*time.Second), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo()
}

// leaderKilled: writers publish while the stream leader is killed; no
// acknowledged record is lost and publishing resumes under the new leader.
func leaderKilled(t *testing.T, c *testCluster) {
	ctx := ctxT(t, 120*time.Second)
	const writers = 4
	type state struct {
		mu    sync.Mutex
		lines map[int64][]byte
		w     *Writer
		err   error
	}
	ws := make([]*state, writers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range ws {
		bus := openBus(t, connect(t, c.url()), SetupConfig{Replicas: 3, LeaseTTL: fenceLeaseTTL})
		thread := id("lk-th", i)
		l := take(t, bus, thread, "writer", false)
		w := openWriter(t, bus, l, thread, WriterOptions{PublishTimeout: time.Second, BackoffMax: 200 * time.Millisecond})
		s := &state{lines: map[int64][]byte{}, w: w}
		ws[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			add := func(r rollout.Record) bool {
				ord, err := w.Append(ctx, r)
				if err != nil {
					s.err = err
					return false
				}
				s.mu.Lock()
				s.lines[ord] = expectLine(r, ord)
				s.mu.Unlock()
				return true
			}
			if !add(meta(thread, thread)) {
				return
			}
			for n := 0; ; n++ {
				select {
				case <-stop:
					s.err = w.Flush(ctx)
					return
				default:
				}
				if !add(item(fmt.Sprintf("w%d-%d", i, n), 300)) {
					return
				}
				if n%4 == 3 {
					_ = w.Flush(ctx) // may report failures while there is no leader
				}
			}
		}()
	}
	acked := func() []int64 {
		out := make([]int64, writers)
		for i, s := range ws {
			out[i] = s.w.Acked()
		}
		return out
	}
	atLeast := func(min []int64, more int64) func() bool {
		return func() bool {
			for i, a := range acked() {
				if a < min[i]+more {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 30*time.Second, "writers to get going", atLeast(make([]int64, writers), 100))
	probe := openBus(t, connect(t, c.url()), SetupConfig{Replicas: 3, LeaseTTL: fenceLeaseTTL})
	s, err := probe.js.Stream(ctx, StreamRollouts)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := info.Cluster.Leader
	before := acked()
	killed := time.Now()
	c.kill(leader)
	waitFor(t, 60*time.Second, "publishes to flow under a new leader", atLeast(acked(), 100))
	t.Logf("killed stream leader %s with %v acked; publishing again after %s", leader, before, time.Since(killed).Round(time.Millisecond))
	close(stop)
	wg.Wait()
	for i, s := range ws {
		if s.err != nil {
			t.Fatalf("writer %d: %v", i, s.err)
		}
		thread := id("lk-th", i)
		es := readAll(t, probe, thread)
		a := s.w.Acked()
		if int64(len(es)) < a {
			t.Fatalf("writer %d: %d records stored, %d acknowledged", i, len(es), a)
		}
		checkContiguous(t, es, len(es))
		for ord := int64(1); ord <= a; ord++ {
			if !bytes.Equal(append(bytes.Clone(es[ord-1].Record.Raw), '\n'), s.lines[ord]) {
				t.Fatalf("writer %d ordinal %d: acknowledged bytes not stored", i, ord)
			}
		}
		st := s.w.Stats()
		t.Logf("writer %d: %d records acked in %d publishes, %d attempts, %d resolved from the tail", i, a, st.Publishes, st.Attempts, st.Resolved)
	}
}
