package ops

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
	"github.com/logbook-agents/logbook/internal/tree/treegen"
)

// BenchmarkImport imports a generated tree of 1,111 threads (fanout 10,
// depth 3, 8 turns; 86,638 records) into an embedded bus with fsync
// always (no mirror, no index): the import's own rate.
// LOGBOOK_BENCH_PARALLEL sets the files imported at once.
func BenchmarkImport(b *testing.B) {
	cfg := treegen.Config{Seed: 1, Fanout: 10, Depth: 3, Turns: 8, Unreceived: 0.01}
	dir := filepath.Join(os.TempDir(), "logbook-bench", "tree-10-3-8")
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		os.RemoveAll(dir)
		if _, err := treegen.Write(dir, cfg); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	par, _ := strconv.Atoi(os.Getenv("LOGBOOK_BENCH_PARALLEL"))
	for range b.N {
		b.StopTimer()
		bus := streamtest.New(b, streamtest.Options{Fsync: stream.FsyncAlways, LeaseTTL: 15 * time.Second})
		b.StartTimer()
		t0 := time.Now()
		res, err := ImportWith(context.Background(), bus.Bus, dir, ImportOptions{Holder: "bench", Parallel: par})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, im := range res {
			if im.Err != "" {
				b.Fatal(im.Err)
			}
			n += im.Published
		}
		b.ReportMetric(float64(n)/time.Since(t0).Seconds(), "records/s")
	}
}
