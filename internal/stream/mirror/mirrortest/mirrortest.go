// Package mirrortest brings a data dir's mirror up to date with a bus, for
// tests and benchmarks of what reads the mirror: the real mirror
// (internal/stream/mirror) runs until it holds everything the bus held
// when Sync was called, then stops, as if `coordinator serve` had caught up
// and been stopped.
package mirrortest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

// Sync runs dir's mirror against bus until its watermark reaches the
// ROLLOUTS stream's last sequence, then stops it. Compression is off (the
// files stay plain). It fails t if the mirror quarantined anything.
func Sync(t testing.TB, bus *stream.Bus, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := bus.JetStream().Stream(ctx, stream.StreamRollouts)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mirror.Open(ctx, mirror.Config{Dir: dir, ColdAfter: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx, bus) }()
	for m.Watermark() < info.State.LastSeq {
		if ctx.Err() != nil {
			stop()
			<-done
			t.Fatalf("mirrortest: the mirror reached sequence %d of %d", m.Watermark(), info.State.LastSeq)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.Quarantined > 0 {
		t.Fatalf("mirrortest: the mirror quarantined %d messages: %v", st.Quarantined, st.QuarantinedByKind)
	}
}
