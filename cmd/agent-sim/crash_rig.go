package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
)

// rig is what a campaign runs: a coordinator (with its embedded NATS, or
// against --nats), the world and the workers, all child processes, and the
// campaign's own connection to the bus.
type rig struct {
	dir, data, ledger, acks string
	external                string      // --nats URL (or the cluster's); "" embeds the bus in the coordinator
	cluster                 *busCluster // --cluster: the nodes the campaign started
	leaseTTL                time.Duration

	url, natsAddr, httpAddr string // read back from the data dir at the first start

	serve   *proc
	world   *proc
	workers []*proc

	client *agent.Client // the campaign's driver threads
	nc     *nats.Conn    // reads of the bus for the checks
	bus    *stream.Bus
	wc     *worldClient

	restarts map[string]int // unexpected exits, restarted
}

type rigConfig struct {
	dir, coordinator, self, natsURL string
	workers, cluster                int
	leaseTTL                        time.Duration
}

func startRig(ctx context.Context, c rigConfig) (*rig, error) {
	r := &rig{dir: c.dir, data: filepath.Join(c.dir, "data"), ledger: filepath.Join(c.dir, "world.jsonl"),
		acks: filepath.Join(c.dir, "acks"), external: c.natsURL, leaseTTL: c.leaseTTL, restarts: map[string]int{}}
	logs := filepath.Join(c.dir, "logs")
	for _, d := range []string{r.data, r.acks, logs, filepath.Join(c.dir, "tokens")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if c.cluster > 0 {
		cl, err := startCluster(ctx, c.dir, c.self, logs, c.cluster)
		if err != nil {
			return nil, err
		}
		r.cluster, r.external, c.natsURL = cl, cl.URLs(), cl.URLs()
	}
	args := []string{"serve", "--data", r.data, "--listen", "127.0.0.1:0", "--lease-ttl", c.leaseTTL.String(), "--cold-after", "1s"}
	if c.natsURL != "" {
		args = append(args, "--nats", c.natsURL)
		if r.cluster != nil {
			args = append(args, "--replicas", "3")
		}
	} else {
		args = append(args, "--nats-listen", "127.0.0.1:0")
	}
	r.serve = &proc{name: "coordinator", bin: c.coordinator, args: args, logs: logs}
	if err := r.startServe(ctx, nil); err != nil {
		r.close()
		return nil, err
	}
	// Restarts bind the same addresses, so every client finds the bus where it was.
	for i, a := range r.serve.args {
		switch {
		case a == "--listen":
			r.serve.args[i+1] = r.httpAddr
		case a == "--nats-listen":
			r.serve.args[i+1] = r.natsAddr
		}
	}
	var err error
	r.client, err = agent.Connect(ctx, r.url, agent.Options{Name: "agent-sim crash", MaxReconnects: 1 << 30, ReconnectWait: 100 * time.Millisecond,
		Logger: logger(discard{}, false)})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("cannot reach the bus at %s: %w", r.url, err)
	}
	r.nc = r.client.Conn()
	if r.bus, err = stream.Open(ctx, r.nc, stream.Options{Logger: logger(discard{}, false)}); err != nil {
		r.close()
		return nil, err
	}
	r.wc = &worldClient{nc: r.nc, timeout: 5 * time.Second}
	r.world = &proc{name: "world", bin: c.self, args: []string{"world", "--nats", r.url, "--ledger", r.ledger}, logs: logs}
	if err := r.world.start(); err != nil {
		r.close()
		return nil, err
	}
	for i := range c.workers {
		id := fmt.Sprintf("w%d", i)
		w := &proc{name: id, bin: c.self, logs: logs,
			args: []string{"worker", "--nats", r.url, "--id", id, "--capacity", "4", "--acks", filepath.Join(r.acks, id+".jsonl")}}
		if err := w.start(); err != nil {
			r.close()
			return nil, err
		}
		r.workers = append(r.workers, w)
	}
	for wait := time.Now().Add(30 * time.Second); ; {
		if _, err := r.wc.ledger(ctx); err == nil {
			break
		} else if time.Now().After(wait) {
			r.close()
			return nil, fmt.Errorf("the world never answered: %v\n%s", err, r.world.stderrTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r, nil
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// startServe starts the coordinator (with env, e.g. an armed crash point)
// and waits until it serves: its addresses written, /healthz 200.
func (r *rig) startServe(ctx context.Context, env []string) error {
	os.Remove(datadir.URLPath(r.data))
	os.Remove(datadir.HTTPURLPath(r.data))
	r.serve.env = env
	if err := r.serve.start(); err != nil {
		return err
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if !r.serve.running() {
			if len(env) > 0 && r.serve.killedBySIGKILL() { // an armed point fired during start-up
				return nil
			}
			return fmt.Errorf("the coordinator exited: %v\n%s", r.serve.exitErr(), r.serve.stderrTail())
		}
		u, h := read(datadir.URLPath(r.data)), read(datadir.HTTPURLPath(r.data))
		if u != "" && h != "" && healthy(ctx, h) {
			r.url = u
			r.natsAddr = strings.TrimPrefix(u, "nats://")
			r.httpAddr = strings.TrimPrefix(h, "http://")
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the coordinator did not become healthy in 60s\n%s", r.serve.stderrTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func healthy(ctx context.Context, httpURL string) bool {
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, httpURL+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// supervise restarts every child that died without the harness killing it
// (a worker fenced after a coordinator restart, a world whose connection
// closed), counting each by name, and those the harness killed as well.
func (r *rig) supervise(ctx context.Context) error {
	if done, expected := r.serve.exited(); done {
		if !expected {
			r.restarts["coordinator"]++
		}
		if err := r.startServe(ctx, nil); err != nil {
			return err
		}
	}
	if r.cluster != nil {
		for _, p := range r.cluster.nodes {
			if done, expected := p.exited(); done {
				if !expected {
					r.restarts[p.name]++
				}
				if err := r.cluster.start(ctx, p); err != nil {
					return err
				}
			}
		}
	}
	for _, p := range append([]*proc{r.world}, r.workers...) {
		if done, expected := p.exited(); done {
			if !expected {
				r.restarts[p.name]++
			}
			p.env = nil
			p.args = withoutCrash(p.args)
			if err := p.start(); err != nil {
				return err
			}
		}
	}
	return nil
}

func withoutCrash(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--crash" || args[i] == "--crash-token" || args[i] == "--think" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// close stops everything the rig started.
func (r *rig) close() {
	if r.client != nil {
		r.client.Close()
	}
	for _, p := range append([]*proc{r.world}, r.workers...) {
		if p != nil && p.running() {
			p.term(5 * time.Second)
		}
	}
	if r.serve != nil && r.serve.running() {
		r.serve.term(10 * time.Second)
	}
	if r.cluster != nil {
		r.cluster.close()
	}
}
