package stream

import (
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestReadLeavesNoConsumer is issue 8 item 8: reading rollouts, whole or
// in part, closed or abandoned, creates no consumer on ROLLOUTS (the server
// allows 1,000 per stream; verify on 11,111 rollouts hit the limit).
func TestReadLeavesNoConsumer(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 30*time.Second)
	const n = 12
	for i := 0; i < n; i++ {
		th := id("th", i)
		w := openWriter(t, bus, take(t, bus, th, "test", false), th, WriterOptions{})
		for _, r := range append(appendRecs(th), item("x", 100)) {
			if _, err := w.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		th := id("th", i)
		checkContiguous(t, readAll(t, bus, th), 3)
		// A reader abandoned after one record, never closed.
		rd, err := bus.ReadRollout(ctx, th, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rd.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, err := bus.JetStream().Stream(ctx, StreamRollouts)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Fatalf("%d consumers left on %s after reading %d rollouts twice, want 0", info.State.Consumers, StreamRollouts, n)
	}
}

func appendRecs(th string) []rollout.Record {
	return []rollout.Record{meta(th, th), userMsg("hi")}
}
