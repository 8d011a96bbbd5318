package stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A call waiting on a server that stops returns within seconds with an
// error naming the closed connection, not at its own (long) deadline.
func TestDialLostServerFailsFast(t *testing.T) {
	ts := startTestServer(t, "")
	nc, err := Dial(ts.url(), "test", quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus := openBus(t, nc, SetupConfig{})
	ts.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = bus.Tail(ctx, "0000000000000001")
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Tail on a stopped server: no error")
	}
	bound := 3 * time.Duration(ReconnectTries) * (ReconnectWait + 100*time.Millisecond)
	if elapsed > bound {
		t.Fatalf("Tail on a stopped server took %v (bound %v): %v", elapsed, bound, err)
	}
	if !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("Tail on a stopped server: %v, want the connection named", err)
	}
	t.Logf("failed after %v: %v", elapsed, err)
}

// TestRetryWithoutDeadlineEnds: a bus call given a context with no deadline
// (a release on the way out) still ends while the server is gone, after
// Options.UnavailableAfter (four call timeouts), with ErrBusUnavailable.
func TestRetryWithoutDeadlineEnds(t *testing.T) {
	ts := startTestServer(t, FsyncInterval)
	nc := connect(t, ts.url())
	openBus(t, nc, SetupConfig{})
	bus, err := Open(ctxT(t, 10*time.Second), nc, Options{Logger: quiet(), CallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := bus.TakeLease(ctxT(t, 10*time.Second), "th1", LeaseOptions{Holder: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ts.stop()
	start := time.Now()
	err = l.Release(context.Background())
	took := time.Since(start)
	if !errors.Is(err, ErrBusUnavailable) || took > 10*time.Second {
		t.Fatalf("Release with no deadline and no server: %v after %v", err, took)
	}
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
}

// TestCloseWithoutDeadlineEnds: a writer closed with a context that has no
// deadline (a close on the way out) while its server is gone gives up once
// nothing was acknowledged for UnavailableAfter plus a publish timeout,
// with ErrBusUnavailable, well before the lease's TTL would stop it.
func TestCloseWithoutDeadlineEnds(t *testing.T) {
	ts := startTestServer(t, FsyncInterval)
	nc := connect(t, ts.url())
	openBus(t, nc, SetupConfig{LeaseTTL: time.Minute})
	bus, err := Open(ctxT(t, 10*time.Second), nc, Options{Logger: quiet(), CallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := bus.TakeLease(ctxT(t, 10*time.Second), "th-close", LeaseOptions{Holder: "test"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.OpenWriter(ctxT(t, 10*time.Second), l, "ro-close", WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctxT(t, 10*time.Second), meta("th-close", "ro-close")); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	ts.stop()
	if _, err := w.Append(ctxT(t, 10*time.Second), userMsg("never acknowledged")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = w.Close(context.Background())
	took := time.Since(start)
	if !errors.Is(err, ErrBusUnavailable) || took > 10*time.Second {
		t.Fatalf("Close with no deadline and no server: %v after %v", err, took)
	}
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
}
