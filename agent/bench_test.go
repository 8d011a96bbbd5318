package agent_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/agent"
)

// BenchmarkHandoff measures how long a thread waits after its worker dies
// (its connection dropped mid-turn, nothing released) until another worker
// runs it: HANDOFFS deaths (default 20) with a 1 s lease TTL, reported as
// p50 and p99 in seconds next to the TTL. The bound the design holds is the
// TTL plus 5 s.
func BenchmarkHandoff(b *testing.B) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("HANDOFFS")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		bus := testBus(b)
		supervisor(b, bus)
		parent := connect(b, bus, "parent")
		ctx := context.Background()
		root, err := parent.StartRoot(ctx, agent.ThreadSpec{ID: "root"})
		if err != nil {
			b.Fatal(err)
		}
		heirRan := make(chan time.Time, n)
		var ttl time.Duration
		var durations []time.Duration
		for i := range n {
			started := make(chan struct{})
			dying := connect(b, bus, fmt.Sprintf("dying%d", i))
			wctx, stop := context.WithCancel(ctx)
			go dying.RunWorker(wctx, agent.WorkerSpec{ID: fmt.Sprintf("dying%d", i)}, func(ctx context.Context, th *agent.Thread, _ *agent.Resumed) error {
				th.Receive(ctx, 10, time.Second)
				turn, err := th.BeginTurn(ctx, agent.TurnSpec{})
				if err != nil {
					return err
				}
				if _, err := turn.StartCall(ctx, agent.CallSpec{Name: "deploy", IdempotencyKey: "k"}); err != nil { // flushed
					return err
				}
				close(started)
				<-ctx.Done()
				return nil
			})
			kid := fmt.Sprintf("kid%d", i)
			if _, err := root.Spawn(ctx, agent.ThreadSpec{ID: kid}, agent.Task{}); err != nil {
				b.Fatal(err)
			}
			<-started
			dying.Close() // the worker dies mid-turn
			died := time.Now()
			heir := connect(b, bus, fmt.Sprintf("heir%d", i)) // started only now, so the offer went to the worker that dies
			ttl = heir.LeaseTTL()
			hctx, stopHeir := context.WithCancel(ctx)
			go heir.RunWorker(hctx, agent.WorkerSpec{ID: fmt.Sprintf("heir%d", i)}, func(ctx context.Context, th *agent.Thread, res *agent.Resumed) error {
				if res.Aborted != "" {
					heirRan <- time.Now()
				}
				return nil
			})
			select {
			case at := <-heirRan:
				durations = append(durations, at.Sub(died))
			case <-time.After(time.Minute):
				b.Fatalf("handoff %d never happened", i)
			}
			stop()
			stopHeir()
		}
		slices.Sort(durations)
		q := func(p float64) float64 {
			return durations[min(len(durations)-1, int(p*float64(len(durations))))].Seconds()
		}
		b.ReportMetric(q(0.5), "p50-s")
		b.ReportMetric(q(0.99), "p99-s")
		b.ReportMetric(ttl.Seconds(), "ttl-s")
	}
}
