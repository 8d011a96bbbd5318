package supervise

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// TestLostOrphanOfferIsMadeAgain: the offer of a dead worker's thread that
// nobody acts on (taken and dropped, as by a worker that found the dead
// holder's lease still live) is made again two lease TTLs later, until a
// sweep sees a live worker hold the thread; then it is never offered again.
func TestLostOrphanOfferIsMadeAgain(t *testing.T) {
	b := streamtest.New(t, streamtest.Options{LeaseTTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bus := b.Bus
	ttl := bus.WorkerTTL()
	if _, err := bus.Threads().Create(ctx, "T", []byte("T")); err != nil {
		t.Fatal(err)
	}
	s := New(bus, Options{Interval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	sweep := func() {
		t.Helper()
		if err := s.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := bus.Heartbeat(ctx, stream.WorkerInfo{ID: "dead", PID: 1, Started: "x", Threads: []string{"T"}}); err != nil {
		t.Fatal(err)
	}
	sweep() // sees it alive, holding T
	time.Sleep(ttl + 300*time.Millisecond)
	sweep() // its heartbeat expired: T is an orphan, offered
	if s.Stats().Offers != 1 {
		t.Fatalf("%d offers after the death, want 1", s.Stats().Offers)
	}
	offers, err := bus.OpenOffers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drop := func() {
		t.Helper()
		got, err := offers.Take(ctx, 1, 2*time.Second)
		if err != nil || len(got) != 1 || got[0].Thread != "T" {
			t.Fatalf("take: %v, %d offers", err, len(got))
		}
		got[0].Ack(ctx) // dropped: nobody takes the lease
	}
	drop()
	sweep()
	if n := s.Stats().Offers; n != 1 {
		t.Fatalf("offered again at once (%d offers)", n)
	}
	time.Sleep(2*ttl + 200*time.Millisecond)
	sweep()
	if n := s.Stats().Offers; n != 2 {
		t.Fatalf("%d offers two TTLs after a lost one, want 2", n)
	}
	// A live worker takes it this time.
	drop()
	lease, err := bus.TakeLease(ctx, "T", stream.LeaseOptions{Holder: "live"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if err := bus.Heartbeat(ctx, stream.WorkerInfo{ID: "live", PID: 2, Started: "y", Threads: []string{"T"}}); err != nil {
		t.Fatal(err)
	}
	sweep()
	lease.Release(ctx)
	time.Sleep(2*ttl + 200*time.Millisecond)
	if err := bus.Heartbeat(ctx, stream.WorkerInfo{ID: "live", PID: 2, Started: "y"}); err != nil {
		t.Fatal(err)
	}
	sweep()
	if n := s.Stats().Offers; n != 2 {
		t.Errorf("%d offers after a live worker held the thread, want 2", n)
	}
}
