package agent_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestCloseAfterTakeoverLeavesTheMailbox: a thread's mailbox is one durable
// consumer, named after the thread, shared by whoever holds it. A Thread
// whose lease was taken over (its process was cut off, or stopped, for
// longer than the TTL) closes without deleting that consumer: it is the new
// holder's now.
func TestCloseAfterTakeoverLeavesTheMailbox(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	c := connect(t, b, "old")
	th, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "mbx"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := th.Receive(ctx, 1, 10*time.Millisecond); err != nil { // opens its mailbox
		t.Fatal(err)
	}
	other := b.Connect(t)
	lease, err := other.TakeLease(ctx, "mbx", stream.LeaseOptions{Holder: "heir", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if _, err := other.Mailbox(ctx, "mbx", 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the old holder's next renewal finds the lease taken over
	th.Close(ctx)
	js, err := jetstream.New(b.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Consumer(ctx, stream.StreamMail, stream.MailConsumerName("mbx")); err != nil {
		t.Errorf("the new holder's mailbox after the old Thread closed: %v", err)
	}
}
