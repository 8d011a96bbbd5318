package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestReconnectForever: a client connected with MaxReconnects -1 rides out
// a server that is away for longer than the default reconnect window (10
// rounds 250 ms apart, about 3 s) and works once the server is back on the
// same address; a client with the default bounds has closed by then.
func TestReconnectForever(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 4 s outage")
	}
	b := testBus(t)
	ctx := testCtx(t)
	forever, err := agent.Connect(ctx, b.Server.ClientURL(), agent.Options{Name: "forever", Logger: quietLog, MaxReconnects: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer forever.Close()
	bounded := connect(t, b, "bounded")

	addr := strings.TrimPrefix(b.Server.ClientURL(), "nats://")
	b.Server.Shutdown()
	b.Server.WaitForShutdown()
	time.Sleep(4 * time.Second)
	ns, err := stream.StartServer(stream.ServerConfig{StoreDir: b.Dir, Listen: addr, Fsync: stream.FsyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })

	deadline := time.Now().Add(10 * time.Second)
	for !forever.Conn().IsConnected() {
		if forever.Conn().IsClosed() || time.Now().After(deadline) {
			t.Fatalf("MaxReconnects -1: not reconnected (closed: %v)", forever.Conn().IsClosed())
		}
		time.Sleep(20 * time.Millisecond)
	}
	th, err := forever.StartRoot(ctx, agent.ThreadSpec{ID: "after-outage"})
	if err != nil {
		t.Fatalf("a call after the outage: %v", err)
	}
	th.Close(ctx)
	if !bounded.Conn().IsClosed() {
		t.Error("the default bounds: still not closed after a 4 s outage")
	}
}
