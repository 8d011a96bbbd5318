package stream

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestStartServerCluster: three embedded servers with ClusterConfig form a
// JetStream cluster (the first routed to a port nobody listens on, the
// others to it): an R3 stream can be created through any of them.
func TestStartServerCluster(t *testing.T) {
	var routes []string
	var urls []string
	for i, name := range []string{"a", "b", "c"} {
		r := []string{"nats://127.0.0.1:1"}
		if i > 0 {
			r = routes
		}
		ns, err := StartServer(ServerConfig{Name: name, StoreDir: t.TempDir(), Listen: "127.0.0.1:0",
			Cluster: &ClusterConfig{Name: "t", Listen: "127.0.0.1:0", Routes: r}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		routes = append(routes, "nats://"+ns.ClusterAddr().String())
		urls = append(urls, ns.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for range 300 { // the meta leader is elected within seconds
		if _, last = js.AddStream(&nats.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3}); last == nil {
			return
		}
		nc.Flush()
	}
	t.Fatalf("no R3 stream on the cluster: %v", last)
}

// TestStartServerClusterBadConfig: a cluster node without a name or a
// route, or with a route that is no URL, is refused with an error saying
// which.
func TestStartServerClusterBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  ClusterConfig
		want string
	}{
		{ClusterConfig{Listen: "127.0.0.1:0", Routes: []string{"nats://127.0.0.1:1"}}, "name"},
		{ClusterConfig{Name: "t", Listen: "127.0.0.1:0"}, "route"},
		{ClusterConfig{Name: "t", Listen: "127.0.0.1:0", Routes: []string{"nats://127.0.0.1:1", "::nope"}}, `route "::nope"`},
		{ClusterConfig{Name: "t", Listen: "nope", Routes: []string{"nats://127.0.0.1:1"}}, "cluster listener"},
	} {
		ns, err := StartServer(ServerConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Cluster: &c.cfg})
		if err == nil {
			ns.Shutdown()
			t.Errorf("%+v: started", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want it to name %s", c.cfg, err, c.want)
		}
	}
}
