// Package streamtest starts a real bus for tests: an embedded nats-server
// with JetStream in a temporary directory, set up as `coordinator serve`
// sets it up. It exists so every package tests against the real JetStream,
// never a mock.
package streamtest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/stream"
)

// Options tune the test bus.
type Options struct {
	LeaseTTL time.Duration // default 2s, so expiry tests stay quick
	Fsync    string        // default interval: tests are not about power loss
}

// Bus is a started server and a bus bound to it; both stop with the test.
type Bus struct {
	*stream.Bus
	Server *server.Server
	Conn   *nats.Conn
	Dir    string
}

// New starts a bus for t.
func New(t testing.TB, o Options) *Bus {
	t.Helper()
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 2 * time.Second
	}
	if o.Fsync == "" {
		o.Fsync = stream.FsyncInterval
	}
	dir := t.TempDir()
	ns, err := stream.StartServer(stream.ServerConfig{StoreDir: dir, Listen: "127.0.0.1:0", Fsync: o.Fsync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Setup(ctx, js, stream.SetupConfig{LeaseTTL: o.LeaseTTL}); err != nil {
		t.Fatal(err)
	}
	b, err := stream.Open(ctx, nc, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &Bus{Bus: b, Server: ns, Conn: nc, Dir: dir}
}

// Connect opens another connection and bus to the same server (a second
// process, as far as the bus can tell).
func (b *Bus) Connect(t testing.TB) *stream.Bus {
	t.Helper()
	nc, err := nats.Connect(b.Server.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	bus, err := stream.Open(context.Background(), nc, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return bus
}

// ConnectConn is Connect returning the connection too: closing it is how a
// test makes a writer "crash" (its publishes and lease renewals stop, the
// lease is not released and expires after its TTL).
func (b *Bus) ConnectConn(t testing.TB) (*stream.Bus, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(b.Server.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	bus, err := stream.Open(context.Background(), nc, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return bus, nc
}
