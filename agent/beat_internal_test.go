package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// TestHoldIsNeverOverwrittenByAnOlderBeat: once hold returns, the
// heartbeat on the bus names the thread, even with periodic beats racing
// it (the 1,000-round crash campaign lost threads of workers killed just
// after taking them: a periodic beat's older list of threads landed after
// the hold's).
func TestHoldIsNeverOverwrittenByAnOlderBeat(t *testing.T) {
	b := streamtest.New(t, streamtest.Options{LeaseTTL: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, b.Server.ClientURL(), Options{Name: "w", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := &worker{c: c, spec: WorkerSpec{ID: "w", Heartbeat: time.Millisecond}, held: map[string]bool{}, info: stream.WorkerInfo{ID: "w", PID: 1, Started: "now"}}
	w.lastBeat = time.Now()
	// A beat that snapshotted no threads is slow to write: without the
	// beats serialized it lands after the hold's.
	beatSnapshotted = func(threads []string) {
		if len(threads) == 0 {
			time.Sleep(3 * time.Millisecond)
		}
	}

	hctx, stop := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); w.heartbeats(hctx, stop, time.Minute) }()
	}
	defer func() { stop(nil); wg.Wait(); beatSnapshotted = nil }()
	for i := range 60 {
		th := fmt.Sprintf("t%d", i)
		w.hold(th, true)
		info, ok, err := c.bus.Worker(ctx, "w")
		if err != nil || !ok {
			t.Fatalf("heartbeat: %v %v", ok, err)
		}
		if !slices.Contains(info.Threads, th) {
			t.Fatalf("hold %d returned, and the heartbeat on the bus lists %v", i, info.Threads)
		}
		w.hold(th, false)
	}
}
