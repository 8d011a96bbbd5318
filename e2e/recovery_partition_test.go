package e2e

import (
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRecoveryWorkerPartitioned: a worker whose connection to the bus goes
// through a TCP proxy; with threads held, mid-run (two effects done), the
// proxy is blackholed (the
// worker is neither killed nor told: its bytes stop moving both ways) for
// longer than the lease TTL. Its heartbeat lapses, another worker takes its
// threads over, and the partitioned worker stops, fenced, instead of writing
// where the other now writes. The proxy is then healed, so whatever the
// partitioned worker had sent before the cut reaches the bus late: nothing
// of it lands. The run completes; nothing was executed twice; the tree
// equals the ground truth.
func TestRecoveryWorkerPartitioned(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	b := startSimBus(t, "2s")
	proxy := startProxy(t, strings.TrimPrefix(b.url, "nats://"))
	part := startChild(t, agentSimBin(t), nil, "worker", "--nats", "nats://"+proxy.addr(), "--id", "part", "--capacity", "4")
	run := b.startRun(t, "--seed", "9", "--agents", "8", "--depth", "2", "--turns", "6")
	var held []string
	if !poll(60*time.Second, func() bool {
		held = b.heldBy(t, "part")
		return len(held) > 0 && effectsSoFar(b.ledger) >= 2 || run.finished() || part.exited()
	}) || len(held) == 0 || run.finished() {
		t.Fatalf("the worker never held a thread (run finished: %v %v)\n%s", run.finished(), run.err, part.stderr)
	}
	proxy.cut()
	cutAt := time.Now()
	t.Logf("partitioned worker part holding %v", held)
	b.worker(t, "heir")

	// Past the lease and heartbeat TTL: the heir takes the threads over and
	// the partitioned worker, seeing its heartbeat lapse, stops.
	if !poll(60*time.Second, part.exited) {
		t.Fatalf("the partitioned worker went on running %v after the cut\n%s", time.Since(cutAt).Round(time.Millisecond), part.stderr)
	}
	t.Logf("the partitioned worker stopped %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	if part.err == nil || part.killedBySignal() || !strings.Contains(part.stderr.String(), "presumed dead") && !strings.Contains(part.stderr.String(), "fenced") {
		t.Errorf("the partitioned worker's exit: %v, want a fencing error\n%s", part.err, part.stderr)
	}
	proxy.heal() // what it sent before the cut now reaches the bus

	s := run.wait(t, b)
	if s.ExecutedTwice != 0 || s.Threads != s.Planned {
		t.Fatalf("summary %+v", s)
	}
	done := map[string]bool{}
	for _, th := range s.Truth {
		done[th.Thread] = true
	}
	for _, th := range held {
		if !done[th] {
			t.Errorf("thread %s, held by the partitioned worker, never completed", th)
		}
	}
	b.checkAgainstTruth(t, s)
}

// heldBy lists the threads worker id holds, from `coordinator workers --json`.
func (b *simBus) heldBy(t testing.TB, id string) []string {
	out, err := b.coordinator(t, "workers", "--nats", b.url, "--json")
	if err != nil {
		return nil
	}
	var ws struct {
		Workers []struct {
			ID      string   `json:"id"`
			Threads []string `json:"threads"`
		} `json:"workers"`
	}
	if json.Unmarshal([]byte(out), &ws) != nil {
		return nil
	}
	for _, w := range ws.Workers {
		if w.ID == id {
			return w.Threads
		}
	}
	return nil
}

// tcpProxy forwards every connection made to its loopback listener to a
// target address. cut blackholes it: bytes stop moving both ways on every
// connection, open or new, as in a network partition (nobody is told, no
// connection is closed); heal lets what was held through, in order.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	moving *sync.Cond
	paused bool
	conns  []net.Conn
}

func startProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	p.moving = sync.NewCond(&p.mu)
	t.Cleanup(p.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, client, server)
	p.mu.Unlock()
	go p.pipe(server, client)
	p.pipe(client, server)
}

// pipe copies from src to dst, holding each chunk while the proxy is cut.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		p.mu.Lock()
		for p.paused {
			p.moving.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

func (p *tcpProxy) heal() {
	p.mu.Lock()
	p.paused = false
	p.moving.Broadcast()
	p.mu.Unlock()
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.heal()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
