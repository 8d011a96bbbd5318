package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// TestOfferOncePerThread: a second offer of a thread while one waits is
// refused; once a worker acknowledges it, the thread can be offered again.
func TestOfferOncePerThread(t *testing.T) {
	b := streamtest.New(t, streamtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, want := range []bool{true, false, false} {
		ok, err := b.Offer(ctx, "th1", stream.OfferMail)
		if err != nil || ok != want {
			t.Fatalf("offer %d: %v, %v; want %v", i, ok, err, want)
		}
	}
	if ok, err := b.Offer(ctx, "th2", stream.OfferWorkerDied); err != nil || !ok {
		t.Fatalf("offer of another thread: %v, %v", ok, err)
	}
	offers, err := b.OpenOffers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := offers.Take(ctx, 10, time.Second)
	if err != nil || len(got) != 2 || got[0].Thread != "th1" || got[0].Reason != stream.OfferMail || got[1].Thread != "th2" {
		t.Fatalf("took %+v, %v", got, err)
	}
	for _, o := range got {
		if err := o.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := b.Offer(ctx, "th1", stream.OfferMail); err != nil || !ok {
		t.Fatalf("offer after the ack: %v, %v", ok, err)
	}
	// A second worker's view: the same consumer, the offer goes to one.
	other, err := b.Connect(t).OpenOffers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := offers.Take(ctx, 1, 500*time.Millisecond)
	c, _ := other.Take(ctx, 1, 500*time.Millisecond)
	if len(a)+len(c) != 1 {
		t.Fatalf("one offer reached %d workers", len(a)+len(c))
	}
}

// TestHeartbeatsExpire: a worker's heartbeat is listed until one TTL after
// its last beat.
func TestHeartbeatsExpire(t *testing.T) {
	b := streamtest.New(t, streamtest.Options{LeaseTTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Heartbeat(ctx, stream.WorkerInfo{ID: "w1", Host: "h", Capacity: 4, Threads: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Heartbeat(ctx, stream.WorkerInfo{ID: "bad id"}); err == nil {
		t.Error("a heartbeat with an invalid worker id was accepted")
	}
	ws, err := b.Workers(ctx)
	if err != nil || len(ws) != 1 || ws[0].ID != "w1" || ws[0].Capacity != 4 || len(ws[0].Threads) != 1 || ws[0].Beat == "" {
		t.Fatalf("workers %+v, %v", ws, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ws, err := b.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat still listed %v after its TTL", time.Since(deadline.Add(-5*time.Second)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMailWaiting: a mailbox with a message waiting is seen; an empty one
// is not.
func TestMailWaiting(t *testing.T) {
	b := streamtest.New(t, streamtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if w, err := b.MailWaiting(ctx, "kid"); err != nil || w {
		t.Fatalf("empty mailbox: %v, %v", w, err)
	}
	if _, _, err := b.PublishMail(ctx, "root", "kid", "m1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if w, err := b.MailWaiting(ctx, "kid"); err != nil || !w {
		t.Fatalf("mailbox with a message: %v, %v", w, err)
	}
	if w, err := b.MailWaiting(ctx, "other"); err != nil || w {
		t.Fatalf("another thread's mailbox: %v, %v", w, err)
	}
	if _, _, err := b.PublishMail(ctx, "root", "kid2", "m2", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if ths, err := b.MailWaitingThreads(ctx); err != nil || len(ths) != 2 || ths[0] != "kid" || ths[1] != "kid2" {
		t.Fatalf("threads with mail waiting: %v, %v", ths, err)
	}
}
