package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestRecoveryCoordinatorKilled: the coordinator (and with it the embedded
// NATS server the agents write to) is SIGKILLed in the middle of a run while
// workers write, stays down for 4 s and is restarted on the same port. The
// workers, the world and the run reconnect and go on (agent-sim reconnects
// forever); the run completes, nothing was executed twice, and the tree
// rebuilt from the mirror equals the ground truth.
func TestRecoveryCoordinatorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	// Down for longer than a command's connection waits (about 3 s) and
	// less than the lease TTL: the workers keep their leases.
	const down, ttl = 4 * time.Second, "8s"
	b := startSimBus(t, ttl)
	workers := []*child{b.worker(t, "w0"), b.worker(t, "w1")}
	run := b.startRun(t, "--seed", "21", "--agents", "12", "--depth", "2", "--turns", "3")
	if !poll(60*time.Second, func() bool { return effectsSoFar(b.ledger) >= 4 || run.finished() }) || run.finished() {
		t.Fatalf("the run did no work before the coordinator could be killed (finished: %v, err %v)", run.finished(), run.err)
	}
	executed := effectsSoFar(b.ledger)
	b.serve.kill()
	killed := time.Now()
	time.Sleep(down)
	t.Logf("coordinator SIGKILLed after %d effects", executed)
	natsAddr := strings.TrimPrefix(b.url, "nats://")
	removeAddrs(b.data)
	b.serve = startChild(t, coordinatorBin(t), nil, "serve", "--data", b.data, "--nats-listen", natsAddr, "--listen", "127.0.0.1:0", "--lease-ttl", ttl)
	_, httpAddr := boundAddrs(t, b.serve, b.data)
	waitHealthy(t, b.serve, httpAddr, 60*time.Second)
	t.Logf("coordinator serving again %v after the kill", time.Since(killed).Round(time.Millisecond))

	s := run.wait(t, b)
	for i, w := range workers {
		if w.exited() {
			t.Errorf("worker w%d did not ride the restart out: %v\n%s", i, w.err, w.stderr)
		}
	}
	if s.ExecutedTwice != 0 || s.Threads != s.Planned {
		t.Fatalf("summary %+v", s)
	}
	b.checkAgainstTruth(t, s)
}

// effectsSoFar counts the effects in the world's ledger (0 before it exists).
func effectsSoFar(path string) int {
	l, _ := readLedger(path)
	return len(l)
}
