package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/stream"
)

// busCluster is the JetStream cluster of a campaign run with --cluster N:
// N `agent-sim nats-node` child processes, owned by the campaign so that
// it can SIGKILL the node that leads ROLLOUTS (the fault nats-leader-kill)
// and start it again on the same store, ports and routes.
type busCluster struct {
	nodes []*proc
	dir   string
	// client and route URLs by node name, read back at the first start.
	client, route map[string]string
}

// startCluster starts n nodes one by one. The first is given a route to a
// port nobody listens on (JetStream refuses a cluster node without routes;
// its peers dial it), each later one routes to those before it. Once every
// node has told its ports, their arguments are fixed: a restart binds the
// same ports and routes to every other node.
func startCluster(ctx context.Context, dir, self, logs string, n int) (*busCluster, error) {
	c := &busCluster{dir: filepath.Join(dir, "cluster"), client: map[string]string{}, route: map[string]string{}}
	routes := []string{"nats://127.0.0.1:1"}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("n%d", i)
		store := filepath.Join(c.dir, name)
		if err := os.MkdirAll(store, 0o755); err != nil {
			return nil, err
		}
		p := &proc{name: name, bin: self, logs: logs, args: []string{"nats-node", "--name", name, "--store", store,
			"--cluster-name", "logbook-crash", "--addr-file", c.addrFile(name), "--routes", strings.Join(routes, ",")}}
		c.nodes = append(c.nodes, p)
		if err := c.start(ctx, p); err != nil {
			c.close()
			return nil, err
		}
		if i == 1 {
			routes = routes[:0]
		}
		routes = append(routes, c.route[name])
	}
	for _, p := range c.nodes {
		var others []string
		for _, q := range c.nodes {
			if q != p {
				others = append(others, c.route[q.name])
			}
		}
		p.args = append(p.args[:len(p.args)-2], "--routes", strings.Join(others, ","),
			"--listen", strings.TrimPrefix(c.client[p.name], "nats://"), "--cluster-listen", strings.TrimPrefix(c.route[p.name], "nats://"))
	}
	if err := c.waitMeta(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *busCluster) addrFile(name string) string { return filepath.Join(c.dir, name+".addr") }

// start starts p and waits until it has written its addresses.
func (c *busCluster) start(ctx context.Context, p *proc) error {
	os.Remove(c.addrFile(p.name))
	if err := p.start(); err != nil {
		return err
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		if b, err := os.ReadFile(c.addrFile(p.name)); err == nil {
			client, route, ok := strings.Cut(strings.TrimSpace(string(b)), "\n")
			if ok {
				c.client[p.name], c.route[p.name] = client, route
				return nil
			}
		}
		if !p.running() {
			return fmt.Errorf("nats node %s exited: %v\n%s", p.name, p.exitErr(), p.stderrTail())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nats node %s did not serve in 60s\n%s", p.name, p.stderrTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URLs are the nodes' client URLs, comma-separated.
func (c *busCluster) URLs() string {
	urls := make([]string, 0, len(c.nodes))
	for _, p := range c.nodes {
		urls = append(urls, c.client[p.name])
	}
	return strings.Join(urls, ",")
}

// waitMeta waits until the cluster has a JetStream meta leader (an
// account info request is answered), so the coordinator can set up its
// streams.
func (c *busCluster) waitMeta(ctx context.Context) error {
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("the cluster at %s: %w", c.URLs(), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var last error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, last = js.AccountInfo(actx)
		cancel()
		if last == nil {
			return nil
		}
	}
	return fmt.Errorf("the cluster at %s elected no JetStream leader in 60s: %v", c.URLs(), last)
}

// leader is the node that leads ROLLOUTS now, asked through nc.
func (c *busCluster) leader(ctx context.Context, nc *nats.Conn) (*proc, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var info *jetstream.StreamInfo
		s, err := js.Stream(ictx, stream.StreamRollouts)
		if err == nil {
			info, err = s.Info(ictx)
		}
		cancel()
		if err != nil {
			last = err
			continue
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			last = errors.New("no leader now")
			continue
		}
		for _, p := range c.nodes {
			if p.name == info.Cluster.Leader {
				return p, nil
			}
		}
		return nil, fmt.Errorf("%s leads %s: not a node of the campaign's cluster", info.Cluster.Leader, stream.StreamRollouts)
	}
	return nil, fmt.Errorf("no leader of %s found in 30s: %v", stream.StreamRollouts, last)
}

// killLeader SIGKILLs the ROLLOUTS leader, keeps it down for down, and
// starts it again; it returns the node's name.
func (c *busCluster) killLeader(ctx context.Context, nc *nats.Conn, down time.Duration) (string, error) {
	p, err := c.leader(ctx, nc)
	if err != nil {
		return "", err
	}
	p.kill()
	select {
	case <-time.After(down):
	case <-ctx.Done():
	}
	return p.name, c.start(ctx, p)
}

// close stops every node cleanly.
func (c *busCluster) close() {
	for _, p := range c.nodes {
		if p.running() {
			p.term(10 * time.Second)
		}
	}
}
