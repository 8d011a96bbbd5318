// Package natstest starts real nats-server clusters for tests: JetStream
// nodes in process, on ports the OS chooses, read back. It imports nothing
// of Logbook's, so any package's tests can use it (internal/stream's own
// in-package tests included); a single embedded server for tests is
// internal/stream/streamtest.
package natstest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a started cluster; its nodes stop with the test.
type Cluster struct {
	Nodes map[string]*server.Server // by name: n1, n2, ...
	Names []string                  // in start order
}

// StartCluster starts n JetStream nodes named n1..nN with the given max
// payload (0: the server's default). The first node's cluster address,
// read back, is every other node's route; the first routes to a port
// nobody listens on (JetStream refuses a cluster node without routes; its
// peers dial it).
func StartCluster(t testing.TB, n int, maxPayload int32) *Cluster {
	t.Helper()
	c := &Cluster{Nodes: map[string]*server.Server{}}
	seed := "nats://127.0.0.1:1"
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("n%d", i)
		opts := &server.Options{
			ServerName: name, Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
			JetStream: true, StoreDir: t.TempDir(), MaxPayload: maxPayload,
			Cluster: server.ClusterOpts{Name: "logbook-test", Host: "127.0.0.1", Port: -1},
			Routes:  server.RoutesFromStr(seed),
		}
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		if i == 1 {
			deadline := time.Now().Add(10 * time.Second)
			for ns.ClusterAddr() == nil {
				if time.Now().After(deadline) {
					t.Fatalf("node %s: no cluster listener", name)
				}
				time.Sleep(10 * time.Millisecond)
			}
			seed = "nats://" + ns.ClusterAddr().String()
		}
		c.Nodes[name] = ns
		c.Names = append(c.Names, name)
	}
	for _, name := range c.Names {
		if !c.Nodes[name].ReadyForConnections(30 * time.Second) {
			t.Fatalf("node %s not ready", name)
		}
	}
	return c
}

// URLs are the nodes' client URLs, comma-separated, in start order.
func (c *Cluster) URLs() string {
	urls := make([]string, 0, len(c.Names))
	for _, name := range c.Names {
		if ns, ok := c.Nodes[name]; ok {
			urls = append(urls, ns.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// Kill shuts a node down (its store stays) and forgets it.
func (c *Cluster) Kill(name string) {
	if ns, ok := c.Nodes[name]; ok {
		ns.Shutdown()
		ns.WaitForShutdown()
		delete(c.Nodes, name)
	}
}
