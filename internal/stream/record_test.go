package stream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// writeFirst writes a rollout holding only thread's session_meta.
func writeFirst(t *testing.T, b *Bus, thread, rolloutID string) {
	t.Helper()
	l := take(t, b, thread, "test", false)
	w := openWriter(t, b, l, rolloutID, WriterOptions{})
	w.Materialize() // published though it holds only the session_meta
	if _, err := w.Append(ctxT(t, 10*time.Second), meta(thread, rolloutID)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A coordinator answers thread records side by side: one request that
// takes long does not hold up the next.
func TestServeThreadRecordsAnswersConcurrently(t *testing.T) {
	ts := startTestServer(t, "")
	coord := openBus(t, connect(t, ts.url()), SetupConfig{})
	agent := openBus(t, connect(t, ts.url()), SetupConfig{})
	release := make(chan struct{})
	coord.answering = func(thread string) {
		if thread == "slow" {
			<-release
		}
	}
	sub, err := coord.ServeThreadRecords(quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	writeFirst(t, agent, "slow", "r-slow")
	writeFirst(t, agent, "fast", "r-fast")

	slow := make(chan error, 1)
	go func() {
		_, err := agent.RecordThread(ctxT(t, 30*time.Second), "slow", "r-slow")
		slow <- err
	}()
	time.Sleep(50 * time.Millisecond) // the slow request is being answered
	if cur, err := agent.RecordThread(ctxT(t, 3*time.Second), "fast", "r-fast"); err != nil || cur != "r-fast" {
		t.Fatalf("fast record while another is answered: %q, %v", cur, err)
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow request was answered before it was let go: %v", err)
	default:
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

// Many requests for one thread at once, each naming another of its
// rollouts: one is recorded, and every request is told that one.
func TestServeThreadRecordsOneWinnerPerThread(t *testing.T) {
	ts := startTestServer(t, "")
	coord := openBus(t, connect(t, ts.url()), SetupConfig{})
	agent := openBus(t, connect(t, ts.url()), SetupConfig{})
	sub, err := coord.ServeThreadRecords(quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	const n = 16
	for i := range n {
		writeFirst(t, agent, "t", id("r", i))
	}
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = agent.RecordThread(ctxT(t, 30*time.Second), "t", id("r", i))
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d (%s): %v", i, id("r", i), errs[i])
		}
	}
	e, err := coord.threads.Get(ctxT(t, 5*time.Second), "t")
	if err != nil {
		t.Fatal(err)
	}
	held := string(e.Value())
	for i := range n {
		if got[i] != held {
			t.Fatalf("request %d (%s): told %q; THREADS holds %q", i, id("r", i), got[i], held)
		}
	}
	if err := rollout.ValidateID("rollout id", held); err != nil {
		t.Fatal(err)
	}
}
