package stream

import (
	"errors"
	"testing"
	"time"
)

// TestMailboxTakeRidesNodeShutdown: a mailbox's Take waiting on a
// three-node cluster when the node that leads its consumer, and that its
// client is connected to, shuts down (the pull ends with 409 "server
// shutdown") returns no mail and no error: the caller takes again, and once
// the client is on another node a mail published then is taken.
func TestMailboxTakeRidesNodeShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: skipped with -short")
	}
	c := startCluster(t)
	cfg := SetupConfig{Replicas: 3, LeaseTTL: fenceLeaseTTL}
	c.setup(cfg)
	ctx := ctxT(t, 60*time.Second)
	// The mailbox's consumer leader, and a client connected to it (it
	// learns the other nodes from it).
	first := openBus(t, connect(t, c.url()), cfg)
	if _, err := first.Mailbox(ctx, "mb-th", 0); err != nil {
		t.Fatal(err)
	}
	cons, err := first.js.Consumer(ctx, StreamMail, MailConsumerName("mb-th"))
	if err != nil {
		t.Fatal(err)
	}
	name := cons.CachedInfo().Cluster.Leader
	nc := connect(t, c.nodes[name].ClientURL())
	bus := openBus(t, nc, cfg)
	mb, err := bus.Mailbox(ctx, "mb-th", 0)
	if err != nil {
		t.Fatal(err)
	}
	took := make(chan error, 1)
	go func() {
		took <- mb.Take(ctx, 1, 10*time.Second, func(m *Mail) error { return errors.New("unexpected mail " + m.MsgID) })
	}()
	time.Sleep(300 * time.Millisecond) // the pull request is waiting
	c.kill(name)
	select {
	case err := <-took:
		if err != nil {
			t.Fatalf("Take after node %s shut down: %v", name, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("Take still waiting 15 s after node %s shut down", name)
	}
	waitFor(t, 30*time.Second, "the client on another node", func() bool { return nc.IsConnected() && nc.ConnectedServerName() != name })
	if _, _, err := bus.PublishMail(ctx, "sender", "mb-th", "m-after", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	var got []string
	waitFor(t, 30*time.Second, "the mail published after the shutdown", func() bool {
		err := mb.Take(ctx, 1, time.Second, func(m *Mail) error { got = append(got, m.MsgID); return m.Ack(ctx) })
		return err == nil && len(got) == 1
	})
}
