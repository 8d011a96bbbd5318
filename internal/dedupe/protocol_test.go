package dedupe_test

import (
	"context"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

func openThread(t *testing.T, bus *stream.Bus, thread string) *stream.Writer {
	t.Helper()
	ctx := context.Background()
	lease, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: "test-" + thread})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lease.Release(context.Background()) }) //nolint:errcheck
	w, err := bus.OpenWriter(ctx, lease, "r"+thread, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := rollout.Builder{}
	for _, r := range []rollout.Record{b.Meta(rollout.SessionMeta{ID: thread, RolloutID: "r" + thread, Cwd: "/"}), b.TaskStarted("t1")} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// TestSendAndReceive: a send is logged and flushed before it is published; a
// receipt is logged and flushed before the mail is acknowledged, after which
// MAIL no longer holds it; a re-send under the same msg_id is not
// delivered again inside the dedupe window.
func TestSendAndReceive(t *testing.T) {
	tb := streamtest.New(t, streamtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parent, child := openThread(t, tb.Bus, "P"), openThread(t, tb.Bus, "C")
	payload, err := dedupe.SendMail(ctx, parent, tb.Bus, "P", rollout.InterAgentSent{MsgID: "m1", IdempotencyKey: "k1", ToThread: "C", Kind: rollout.MsgTask})
	if err != nil {
		t.Fatal(err)
	}
	if parent.Acked() < 3 {
		t.Fatalf("the send was published before it was acknowledged in the log (acked %d)", parent.Acked())
	}
	if pending, _ := tb.MailPending(ctx, "C", "m1"); !pending {
		t.Fatal("m1 is not on MAIL")
	}
	if err := dedupe.ResendMail(ctx, tb.Bus, "P", payload); err != nil {
		t.Fatal(err)
	}
	if st, err := tb.JetStream().Stream(ctx, "MAIL"); err == nil {
		info, _ := st.Info(ctx)
		t.Logf("MAIL holds %d messages", info.State.Msgs)
	}
	mb, err := tb.Mailbox(ctx, "C", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dedupe.ReceiveMail(ctx, child, mb, 10, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].MsgID != "m1" || got[0].FromThread != "P" || got[0].Kind != rollout.MsgTask {
		t.Fatalf("received %+v, want m1 once (the re-send is deduplicated by its msg_id)", got)
	}
	if child.Acked() < 3 {
		t.Fatal("the receipt was not flushed before the ack")
	}
	if pending, _ := tb.MailPending(ctx, "C", "m1"); pending {
		t.Fatal("m1 is still on MAIL after its receipt")
	}
	if more, _ := dedupe.ReceiveMail(ctx, child, mb, 10, 200*time.Millisecond); len(more) != 0 {
		t.Fatalf("received again: %+v", more)
	}
}
