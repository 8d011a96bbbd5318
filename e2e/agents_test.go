package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/natstest"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

var (
	simOnce sync.Once
	simPath string
	simErr  error
)

// agentSimBin builds cmd/agent-sim once per test binary, next to the
// coordinator.
func agentSimBin(t testing.TB) string {
	t.Helper()
	coord := coordinatorBin(t)
	simOnce.Do(func() {
		simPath = filepath.Join(filepath.Dir(coord), "agent-sim")
		out, err := exec.Command("go", "build", "-o", simPath, "github.com/logbook-agents/logbook/cmd/agent-sim").CombinedOutput()
		if err != nil {
			simErr = fmt.Errorf("go build agent-sim: %v\n%s", err, out)
		}
	})
	if simErr != nil {
		t.Fatal(simErr)
	}
	return simPath
}

// simBus is a serving coordinator with its embedded NATS and a world.
type simBus struct {
	data, url, ledger string
	serve, world      *child
	// agentConn are the credential flags of agents (workers, runs); empty
	// on a bus without authentication.
	agentConn []string
}

func startSimBus(t testing.TB, leaseTTL string) *simBus {
	return startSimBusWith(t, leaseTTL, nil, nil)
}

// startSimBusWith starts it with extra serve flags; worldConn are the
// world's credential flags (with --auth in serveArgs).
func startSimBusWith(t testing.TB, leaseTTL string, serveArgs, worldConn []string, agentConn ...string) *simBus {
	t.Helper()
	coord, sim := coordinatorBin(t), agentSimBin(t)
	dir := t.TempDir()
	b := &simBus{data: filepath.Join(dir, "data"), ledger: filepath.Join(dir, "world.jsonl"), agentConn: agentConn}
	b.serve = startChild(t, coord, nil, append([]string{"serve", "--data", b.data, "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--lease-ttl", leaseTTL}, serveArgs...)...)
	if !poll(30*time.Second, func() bool {
		raw, err := os.ReadFile(filepath.Join(b.data, "nats.url"))
		b.url = strings.TrimSpace(string(raw))
		return err == nil && b.url != "" || b.serve.exited()
	}) || b.serve.exited() {
		t.Fatalf("coordinator did not start: %v\n%s", b.serve.err, b.serve.stderr)
	}
	b.world = startChild(t, sim, nil, append([]string{"world", "--nats", b.url, "--ledger", b.ledger}, worldConn...)...)
	return b
}

func (b *simBus) worker(t testing.TB, id string, extra ...string) *child {
	args := append([]string{"worker", "--nats", b.url, "--id", id, "--capacity", "4"}, b.agentConn...)
	return startChild(t, agentSimBin(t), nil, append(args, extra...)...)
}

// run runs agent-sim run and decodes its JSON summary.
func (b *simBus) run(t testing.TB, args ...string) simSummary {
	t.Helper()
	args = append(append([]string{"run", "--nats", b.url, "--json", "--timeout", "3m"}, b.agentConn...), args...)
	cmd := exec.Command(agentSimBin(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("agent-sim run: %v\n%s\n%s\nworld: %s\nserve: %s", err, out.String(), errb.String(), b.world.stderr, lastLines(b.serve.stderr.String(), 20))
	}
	var s simSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("agent-sim run --json: %v\n%s", err, out.String())
	}
	return s
}

type simSummary struct {
	Root          string `json:"root"`
	Planned       int    `json:"planned_threads"`
	Threads       int    `json:"threads"`
	Turns         int    `json:"turns"`
	Records       int64  `json:"records"`
	SideEffects   int    `json:"side_effects"`
	ExecutedTwice int    `json:"executed_twice"`
	Rerequested   int    `json:"rerequested"`
	Truth         []struct {
		Thread  string   `json:"thread"`
		Parent  string   `json:"parent"`
		Turns   int      `json:"turns"`
		Records int64    `json:"records"`
		Keys    []string `json:"side_effect_keys"`
	} `json:"ground_truth"`
}

// coordinator runs a coordinator command and returns its stdout.
func (b *simBus) coordinator(t testing.TB, args ...string) (string, error) {
	cmd := exec.Command(coordinatorBin(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%v: %s", err, errb.String())
	}
	return out.String(), err
}

type treeNode struct {
	ThreadID  string `json:"thread_id"`
	Parent    string `json:"parent_thread_id"`
	RolloutID string `json:"rollout_id"`
	Status    string `json:"status"`
	Counts    struct {
		InterruptedTurns int `json:"interrupted_turns"`
		UnknownCalls     int `json:"unknown_calls"`
	} `json:"counts"`
	Unconfirmed int        `json:"unconfirmed"`
	Children    []treeNode `json:"children"`
}

// edges flattens a tree into "parent>child" lines.
func edges(ns []treeNode, out map[string]string) {
	for _, n := range ns {
		out[n.ThreadID] = n.Parent
		edges(n.Children, out)
	}
}

// checkAgainstTruth: once the mirror has caught up, `tree --data` holds
// exactly the ground truth's parent links (plus the run's driver), every
// thread's mirror file holds the records its writer was told were
// acknowledged, nothing is unconfirmed, and verify --data is clean (the
// mirror byte-equal to JetStream).
func (b *simBus) checkAgainstTruth(t *testing.T, s simSummary) {
	t.Helper()
	want := map[string]string{"run-" + s.Root: ""}
	for _, th := range s.Truth {
		want[th.Thread] = th.Parent
	}
	var got map[string]string
	var last string
	ok := poll(30*time.Second, func() bool {
		out, err := b.coordinator(t, "tree", "--data", b.data, "--json")
		if err != nil {
			last = err.Error()
			return false
		}
		var tr struct {
			Roots []treeNode `json:"roots"`
		}
		if err := json.Unmarshal([]byte(out), &tr); err != nil {
			last = err.Error()
			return false
		}
		got = map[string]string{}
		edges(tr.Roots, got)
		return fmt.Sprint(sortedMap(got)) == fmt.Sprint(sortedMap(want))
	})
	if !ok {
		t.Fatalf("tree --data never matched the ground truth (%s):\n got  %v\n want %v", last, sortedMap(got), sortedMap(want))
	}
	b.checkAcknowledged(t, s)
	out, err := b.coordinator(t, "unconfirmed", "--data", b.data, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var u struct {
		ChildResults []json.RawMessage `json:"child_results"`
		Deliveries   []json.RawMessage `json:"deliveries"`
	}
	if err := json.Unmarshal([]byte(out), &u); err != nil || len(u.ChildResults) != 0 || len(u.Deliveries) != 0 {
		t.Errorf("unconfirmed after a completed tree: %v\n%s", err, out)
	}
	if out, err := b.coordinator(t, "verify", "--data", b.data); err != nil {
		t.Errorf("verify --data: %v\n%s", err, out)
	}
	fastEqualsNaive(t, filepath.Join(b.data, "rollouts"))
}

// fastEqualsNaive replays every mirror file both ways: the states must be
// equal but for the replay statistics.
func fastEqualsNaive(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		f, err := rollout.OpenFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fast, ferr := replay.Fast(f, replay.Options{})
		naive, nerr := replay.Naive(f, replay.Options{})
		if ferr != nil || nerr != nil {
			t.Fatalf("%s: fast %v, naive %v", e.Name(), ferr, nerr)
		}
		fast.Replay, naive.Replay = replay.Stats{}, replay.Stats{}
		fj, _ := json.Marshal(fast)
		nj, _ := json.Marshal(naive)
		if !bytes.Equal(fj, nj) {
			t.Errorf("%s: fast replay differs from naive:\n%s\n%s", e.Name(), fj, nj)
		}
		n++
	}
	if n == 0 {
		t.Error("no mirror file to replay")
	}
}

func sortedMap(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, v+">"+k)
	}
	sort.Strings(out)
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestAgentTreeByThreeWorkers: a three-level tree run to completion by three
// worker processes: the lineage equals the ground truth, nothing is
// unconfirmed, verify --data is clean, no effect ran twice.
func TestAgentTreeByThreeWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	b := startSimBus(t, "3s")
	for i := range 3 {
		b.worker(t, fmt.Sprintf("w%d", i))
	}
	s := b.run(t, "--seed", "11", "--agents", "15", "--depth", "2", "--turns", "3")
	if s.Threads != s.Planned || s.Planned < 10 || s.Turns != 3*s.Threads || s.ExecutedTwice != 0 || s.Rerequested != 0 {
		t.Fatalf("summary %+v", s)
	}
	b.checkAgainstTruth(t, s)
}

// TestZombieWorkerIsFenced: a worker SIGSTOPped past its lease TTL while it
// holds threads; they are taken over and the tree completes; SIGCONTed, the
// zombie writes nothing that lands and stops with a fencing error.
func TestZombieWorkerIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	b := startSimBus(t, "2s")
	zombie := b.worker(t, "zombie")
	done := make(chan simSummary, 1)
	go func() { done <- b.run(t, "--seed", "9", "--agents", "8", "--depth", "2", "--turns", "6") }()
	if !poll(60*time.Second, func() bool {
		out, _ := b.coordinator(t, "workers", "--nats", b.url, "--json")
		return strings.Contains(out, `"threads": [`+"\n") || strings.Contains(out, `"threads": ["`)
	}) {
		t.Fatal("the worker never held a thread")
	}
	zombie.cmd.Process.Signal(syscall.SIGSTOP)
	b.worker(t, "heir")
	time.Sleep(5 * time.Second) // past the lease and heartbeat TTL: its threads are taken over
	zombie.cmd.Process.Signal(syscall.SIGCONT)
	s := <-done
	if !poll(30*time.Second, zombie.exited) {
		t.Fatal("the zombie went on running after its threads were taken over")
	}
	if zombie.err == nil || !strings.Contains(zombie.stderr.String(), "presumed dead") && !strings.Contains(zombie.stderr.String(), "fenced") && !strings.Contains(zombie.stderr.String(), "lease") {
		t.Errorf("zombie exit: %v\n%s", zombie.err, zombie.stderr)
	}
	if s.ExecutedTwice != 0 || s.Threads != s.Planned {
		t.Fatalf("summary %+v", s)
	}
	b.checkAgainstTruth(t, s)
}

// TestAgentTreeOnCluster: the same tree on a three-node cluster with R3
// streams, each worker connected to a different node, the world and the run
// to others: the lineage equals the ground truth and nothing is left
// unconfirmed.
func TestAgentTreeOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster and real processes")
	}
	b, _ := startSimCluster(t, "3s")
	s := b.run(t, "--seed", "13", "--agents", "12", "--depth", "2", "--turns", "2")
	if s.Threads != s.Planned || s.ExecutedTwice != 0 || s.Rerequested != 0 {
		t.Fatalf("summary %+v", s)
	}
	b.checkAgainstTruth(t, s)
}

// startSimCluster starts a three-node cluster, a coordinator serving it
// with R3 streams, a world on n1 and a worker on each node (w0 on n1, w1 on
// n2, w2 on n3); runs go to n2. Each process is given one node's URL and
// learns the others from it, so it fails over when that node goes.
func startSimCluster(t *testing.T, leaseTTL string) (*simBus, *natstest.Cluster) {
	t.Helper()
	c := natstest.StartCluster(t, 3, stream.EmbeddedMaxPayload)
	var urls []string
	for _, name := range c.Names {
		urls = append(urls, c.Nodes[name].ClientURL())
	}
	dir := t.TempDir()
	b := &simBus{data: filepath.Join(dir, "data"), ledger: filepath.Join(dir, "world.jsonl"), url: urls[0]}
	b.serve = startChild(t, coordinatorBin(t), nil, "serve", "--data", b.data, "--nats", strings.Join(urls, ","), "--replicas", "3",
		"--listen", "127.0.0.1:0", "--lease-ttl", leaseTTL)
	if !poll(60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(b.data, "nats.url"))
		return err == nil || b.serve.exited()
	}) || b.serve.exited() {
		t.Fatalf("coordinator did not start on the cluster: %v\n%s", b.serve.err, b.serve.stderr)
	}
	b.world = startChild(t, agentSimBin(t), nil, "world", "--nats", urls[0], "--ledger", b.ledger)
	for i, u := range urls {
		startChild(t, agentSimBin(t), nil, "worker", "--nats", u, "--id", fmt.Sprintf("w%d", i), "--capacity", "4")
	}
	b.url = urls[1]
	return b, c
}
