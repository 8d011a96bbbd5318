package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// BenchmarkAgentTree runs a simulated tree of AGENTS threads (default 1,000;
// depth 3, 4 turns each) on WORKERS worker processes (default 4) against a
// serving coordinator, and in the same run writes as many records with one
// writer alone, so the two rates compare on the same machine and load. It
// reports records/s, turns/s and threads/s end to end, the writer's
// records/s, and the peak RSS of the coordinator and of the largest worker.
func BenchmarkAgentTree(b *testing.B) {
	agents := envInt("AGENTS", 1000)
	workers := envInt("WORKERS", 4)
	for range b.N {
		bus := startSimBus(b, "15s")
		var ws []*child
		for i := range workers {
			ws = append(ws, bus.worker(b, fmt.Sprintf("bw%d", i), "--capacity", "32"))
		}
		start := time.Now()
		s := bus.run(b, "--seed", "4", "--agents", strconv.Itoa(agents), "--depth", "3", "--turns", "4", "--timeout", "60m")
		elapsed := time.Since(start).Seconds()
		b.ReportMetric(float64(s.Records)/elapsed, "records/s")
		b.ReportMetric(float64(s.Turns)/elapsed, "turns/s")
		b.ReportMetric(float64(s.Threads)/elapsed, "threads/s")
		b.ReportMetric(float64(peakRSS(bus.serve.cmd.Process.Pid))/1024, "coordinator-MB")
		worst := 0
		for _, w := range ws {
			worst = max(worst, peakRSS(w.cmd.Process.Pid))
		}
		b.ReportMetric(float64(worst)/1024, "worker-MB")
		b.ReportMetric(writerAlone(b, bus.url, s.Records), "writer-records/s")
		b.Logf("%d threads, %d turns, %d records in %.1fs on %d workers", s.Threads, s.Turns, s.Records, elapsed, workers)
	}
}

// peakRSS is a process's VmHWM in KiB (0 when it cannot be read).
func peakRSS(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// writerAlone writes n small records with one writer and returns records/s.
func writerAlone(b *testing.B, url string, n int64) float64 {
	nc, err := stream.Dial(url, "bench writer", quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	lease, err := bus.TakeLease(ctx, "bench-writer", stream.LeaseOptions{Holder: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer lease.Release(ctx)
	w, err := bus.OpenWriter(ctx, lease, "bench-writer-r", stream.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var rb rollout.Builder
	start := time.Now()
	w.Append(ctx, rb.Meta(rollout.SessionMeta{ID: "bench-writer", RolloutID: "bench-writer-r", Source: rollout.Source{Kind: "sim"}, Cwd: "/"}))
	for i := int64(1); i < n; i++ {
		if _, err := w.Append(ctx, rb.Message("assistant", "a simulated turn's message of about a hundred bytes, as the sim writes them")); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}
