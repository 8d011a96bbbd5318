package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// The scenarios below run on one server here and on a 3-node cluster with
// R3 streams in cluster_test.go.

const fenceLeaseTTL = 3 * time.Second

func TestLeaseTakeover(t *testing.T) {
	t.Parallel() // waits out TTLs
	ts := startTestServer(t, FsyncInterval)
	bus := openBus(t, connect(t, ts.url()), SetupConfig{LeaseTTL: fenceLeaseTTL})
	ctx := ctxT(t, 30*time.Second)

	a := take(t, bus, "th1", "holder-a", false)
	_, err := bus.TakeLease(ctx, "th1", LeaseOptions{Holder: "holder-b"})
	var held *LeaseHeldError
	if !errors.As(err, &held) || held.Holder != "holder-a" || held.Epoch != a.Epoch() || held.Expires.Before(time.Now()) {
		t.Fatalf("taking a live lease: %v", err)
	}
	t.Log(err)
	// Renewals keep the epoch.
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := bus.ReadLease(ctx, "th1"); err != nil || info.Epoch != a.Epoch() || info.Holder != "holder-a" {
		t.Fatalf("lease after renewal: %+v %v (epoch %d)", info, err, a.Epoch())
	}
	// Forcing bumps the epoch; the old holder's next renewal fails and it stops.
	b := take(t, bus, "th1", "holder-b", true)
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("forced epoch %d is not above %d", b.Epoch(), a.Epoch())
	}
	select {
	case <-a.Done():
	case <-time.After(2 * fenceLeaseTTL):
		t.Fatal("the old holder did not notice the takeover")
	}
	if !errors.Is(a.Err(), ErrLeaseLost) {
		t.Fatalf("old holder: %v", a.Err())
	}
	if err := a.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renewing a lost lease: %v", err)
	}
	// A writer on a lost lease refuses everything.
	if _, err := bus.OpenWriter(ctx, a, "ro1", WriterOptions{}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("writer on a lost lease: %v", err)
	}
	// Released: the next taker need not wait for the TTL.
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := take(t, bus, "th1", "holder-c", false)
	if c.Epoch() <= b.Epoch() {
		t.Fatalf("epoch after release %d is not above %d", c.Epoch(), b.Epoch())
	}
	// An expired lease is taken over without force.
	d := take(t, bus, "th2", "crashed", false)
	d.mu.Lock()
	close(d.stop) // stop renewing, as a crashed holder does
	d.mu.Unlock()
	<-d.stopped
	var e *Lease
	waitFor(t, 3*fenceLeaseTTL, "the crashed holder's lease to expire", func() bool {
		e, err = bus.TakeLease(ctx, "th2", LeaseOptions{Holder: "next"})
		return err == nil
	})
	defer e.Release(ctx)
	if e.Epoch() <= d.Epoch() {
		t.Fatalf("epoch after expiry %d is not above %d", e.Epoch(), d.Epoch())
	}
}

func TestFencingOneServer(t *testing.T) {
	t.Parallel() // waits out renewals
	ts := startTestServer(t, FsyncInterval)
	setup := SetupConfig{LeaseTTL: fenceLeaseTTL}
	busA := openBus(t, connect(t, ts.url()), setup)
	busB := openBus(t, connect(t, ts.url()), setup)
	t.Run("zombie-resumer-race", func(t *testing.T) {
		for i := 0; i < raceRounds(); i++ {
			raceZombieResumer(t, busA, busB, id("race-th", i), id("race-ro", i))
		}
	})
	t.Run("retry-landed", func(t *testing.T) { retryLanded(t, busA, "one") })
}

func raceRounds() int {
	if testing.Short() {
		return 3
	}
	return 8
}

// raceZombieResumer: a zombie (A) and a resumer (B, which forced the lease)
// append at the same ordinals with the same pack boundaries. Whatever
// happens, the bytes stored at every ordinal are those of the writer that
// got the success ack for it, and the zombie stops.
func raceZombieResumer(t *testing.T, busA, busB *Bus, thread, rid string) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	la, err := busA.TakeLease(ctx, thread, LeaseOptions{Holder: "zombie"})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(ctx)
	wa := openWriter(t, busA, la, rid, WriterOptions{})
	head := []rollout.Record{meta(thread, rid), userMsg("start")}
	for _, r := range head {
		if _, err := wa.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := wa.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := busB.TakeLease(ctx, thread, LeaseOptions{Holder: "resumer", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release(ctx)
	wb := openWriter(t, busB, lb, rid, WriterOptions{})

	type outcome struct {
		lines map[int64][]byte
		acked int64
		err   error
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	run := func(w *Writer, name string, out *outcome) {
		defer wg.Done()
		out.lines = map[int64][]byte{}
		<-start
		for i := 0; i < 40 && out.err == nil; i++ {
			r := item(fmt.Sprintf("%s-%d", name, i), 120)
			ord, err := w.Append(ctx, r)
			if err != nil {
				out.err = err
				break
			}
			out.lines[ord] = expectLine(r, ord)
			out.err = w.Flush(ctx)
		}
		out.acked = w.Acked()
	}
	var a, b outcome
	wg.Add(2)
	go run(wa, "zombie", &a)
	go run(wb, "resumer", &b)
	close(start)
	wg.Wait()

	es := readAll(t, busA, rid)
	stored := map[int64][]byte{}
	for i, e := range es {
		if e.Ordinal != int64(i+1) {
			t.Fatalf("stored ordinals not contiguous at %d: %d", i+1, e.Ordinal)
		}
		stored[e.Ordinal] = append(bytes.Clone(e.Record.Raw), '\n')
	}
	for _, c := range []struct {
		name string
		o    outcome
	}{{"zombie", a}, {"resumer", b}} {
		for ord := int64(3); ord <= c.o.acked; ord++ {
			if !bytes.Equal(stored[ord], c.o.lines[ord]) {
				t.Fatalf("%s was acked for ordinal %d but the bus holds\n%s\nnot\n%s", c.name, ord, stored[ord], c.o.lines[ord])
			}
		}
	}
	var fa, fb *FencedError
	errors.As(a.err, &fa)
	errors.As(b.err, &fb)
	if fa == nil && fb == nil && !errors.Is(a.err, ErrLeaseLost) {
		t.Fatalf("neither writer was fenced: zombie %v, resumer %v", a.err, b.err)
	}
	if fa != nil && fa.StoredEpoch != lb.Epoch() || fb != nil && fb.StoredEpoch != la.Epoch() {
		t.Fatalf("fenced by the wrong epoch: zombie %v, resumer %v", a.err, b.err)
	}
	// The zombie stops: fenced at once, or at its next renewal.
	waitFor(t, 2*fenceLeaseTTL, "the zombie to stop", func() bool { return wa.Err() != nil })
	if _, err := wa.Append(ctx, item("late", 100)); err == nil {
		t.Fatal("the zombie still takes records")
	}
	t.Logf("%s: zombie acked to %d (%v); resumer acked to %d (%v); %d stored", rid, a.acked, a.err, b.acked, b.err, len(es))
}

// retryLanded: a publish whose ack is lost (and, the second time, whose
// first tail read fails too, so it is sent again) is recognised as landed,
// for single records and for packs, and is stored once.
func retryLanded(t *testing.T, bus *Bus, tag string) {
	for _, packed := range []bool{false, true} {
		for _, resend := range []bool{false, true} {
			name := fmt.Sprintf("packed=%v/resend=%v", packed, resend)
			t.Run(name, func(t *testing.T) {
				ctx := ctxT(t, 60*time.Second)
				thread := fmt.Sprintf("rl-%s-%v-%v", tag, packed, resend)
				rid := thread + "-ro"
				var mu sync.Mutex
				dropped, failedRead := false, false
				h := &hooks{
					afterPublish: func(p *pack, ack *jetstream.PubAck, err error) (*jetstream.PubAck, error) {
						mu.Lock()
						defer mu.Unlock()
						if err == nil && !dropped && p.last >= 3 {
							dropped = true
							return nil, context.DeadlineExceeded // the server stored it; we never hear so
						}
						return ack, err
					},
					beforeResolve: func(p *pack) error {
						mu.Lock()
						defer mu.Unlock()
						if resend && !failedRead {
							failedRead = true
							return errors.New("injected: tail read failed")
						}
						return nil
					},
				}
				l := take(t, bus, thread, "test", false)
				w := openWriter(t, bus, l, rid, WriterOptions{hooks: h, BackoffMin: time.Millisecond})
				var recs []rollout.Record
				add := func(r rollout.Record) {
					if _, err := w.Append(ctx, r); err != nil {
						t.Fatal(err)
					}
					recs = append(recs, r)
					if !packed {
						if err := w.Flush(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				add(meta(thread, rid))
				if packed {
					for i := 0; i < 9; i++ {
						add(turnContext(id("t", i)))
					}
					w.Materialize() // one pack of ordinals 1-10
				} else {
					add(userMsg("hi"))
					for i := 0; i < 8; i++ {
						add(item(id("i", i), 200))
					}
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				st := w.Stats()
				es := readAll(t, bus, rid)
				checkContiguous(t, es, 10)
				seqs := map[uint64]bool{}
				for i, e := range es {
					seqs[e.Seq] = true
					if !bytes.Equal(append(bytes.Clone(e.Record.Raw), '\n'), expectLine(recs[i], int64(i+1))) {
						t.Fatalf("ordinal %d holds other bytes", i+1)
					}
				}
				wantAttempts := st.Publishes
				if resend {
					wantAttempts++
				}
				if !dropped || st.Resolved != 1 || int64(len(seqs)) != st.Publishes || st.Attempts != wantAttempts {
					t.Fatalf("stats %+v, %d messages stored, ack dropped %v", st, len(seqs), dropped)
				}
				if packed && st.Publishes != 1 {
					t.Fatalf("packed: %d publishes", st.Publishes)
				}
			})
		}
	}
}
