package simcrash

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/stream"
)

// TestProxyCutIsAKill: through the proxy, JetStream publishes are
// acknowledged and recorded as acknowledged; the publish the rule cuts at
// never reaches the server, nor anything after it, and the client cannot
// reconnect through the proxy.
func TestProxyCutIsAKill(t *testing.T) {
	e := testEnv(t)
	ctx := testCtx(t)
	died := make(chan struct{})
	p, err := NewProxy(e.addr, func(f *Frame) Verdict {
		if strings.HasSuffix(f.Subject, ".cut") {
			return DropAndCut
		}
		return Forward
	}, func() { close(died) })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	nc, err := nats.Connect(p.URL(), nats.MaxReconnects(3), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(stream.MailSubject("proxy-a"))
	msg.Header.Set("Nats-Msg-Id", "m1")
	msg.Data = []byte(`{"msg_id":"m1"}`)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	// The ack is recorded once it was written to the client.
	var acked []Acked
	for deadline := time.Now().Add(5 * time.Second); len(acked) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		acked = p.Acked()
	}
	if len(acked) != 1 || acked[0].Stream != stream.StreamMail || acked[0].Seq != ack.Sequence || acked[0].HeaderValue("Nats-Msg-Id") != "m1" {
		t.Fatalf("acked %+v, server said %+v", acked, ack)
	}
	nc.Publish(stream.MailSubject("proxy-b")+".cut", []byte("x")) // MAIL would store it: it must not arrive
	nc.Publish(stream.MailSubject("proxy-a"), []byte("after"))
	nc.Flush()
	select {
	case <-died:
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not cut")
	}
	time.Sleep(100 * time.Millisecond) // reconnect attempts fail: the listener is closed
	if nc.IsConnected() {
		t.Fatal("the client reconnected through a cut proxy")
	}
	n, err := e.mail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n["proxy-a"] != 1 {
		t.Errorf("MAIL holds %d messages for proxy-a, want 1 (the one before the cut)", n["proxy-a"])
	}
	if !p.IsCut() {
		t.Error("IsCut false after the cut")
	}
}
