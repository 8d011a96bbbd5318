package e2e

// BenchmarkRestart measures `coordinator serve` from start to ready (the
// index caught up with the mirror, the mirror running) on a data dir of
// LOGBOOK_BENCH_THREADS threads (default 10,000) and LOGBOOK_BENCH_RECORDS
// records (default 1,000,000) that went through the bus, against a cold
// `coordinator reindex` of the same data (docs/BENCHMARKS.md, "Mirror"):
//
//	go test -run '^$' -bench Restart -benchtime 1x -timeout 60m ./e2e/
//
// LOGBOOK_BENCH_DIR keeps the data dir between runs (building it takes
// minutes); it is reused when it holds bench.done.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func BenchmarkRestart(b *testing.B) {
	threads := envInt("LOGBOOK_BENCH_THREADS", 10_000)
	records := envInt("LOGBOOK_BENCH_RECORDS", 1_000_000)
	dir := os.Getenv("LOGBOOK_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	bin := coordinatorBin(b)
	// The OS picks the ports at the first start; restarts take them again.
	natsAddr, httpAddr := "127.0.0.1:0", "127.0.0.1:0"
	start := func() (*child, time.Duration) {
		t0 := time.Now()
		removeAddrs(dir)
		c := startChild(b, bin, nil, "serve", "--data", dir, "--nats-listen", natsAddr, "--listen", httpAddr)
		natsAddr, httpAddr = boundAddrs(b, c, dir)
		if !poll(30*time.Minute, func() bool {
			code, _ := httpGet("http://" + httpAddr + "/healthz")
			return code == 200 || c.exited()
		}) || c.exited() {
			b.Fatalf("coordinator did not become ready: %v\n%s", c.err, c.stderr)
		}
		return c, time.Since(t0)
	}
	c, _ := start()
	if _, err := os.Stat(filepath.Join(dir, "bench.done")); err != nil {
		t0 := time.Now()
		n := generate(b, "nats://"+natsAddr, threads, records)
		b.Logf("published %d records in %d threads in %s", n, threads, time.Since(t0).Round(time.Second))
		waitIndexed(b, dir, int64(n))
		b.Logf("mirrored and indexed %s after the start", time.Since(t0).Round(time.Second))
		if err := os.WriteFile(filepath.Join(dir, "bench.done"), []byte(strconv.Itoa(n)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	nb, _ := os.ReadFile(filepath.Join(dir, "bench.done"))
	total, _ := strconv.Atoi(string(nb))
	stop := func(sig syscall.Signal) {
		_ = c.cmd.Process.Signal(sig)
		<-c.done
	}
	for range b.N {
		var clean, killed []time.Duration
		for range 3 {
			stop(syscall.SIGTERM)
			var d time.Duration
			c, d = start()
			clean = append(clean, d)
			waitIndexed(b, dir, int64(total))
		}
		for range 3 {
			stop(syscall.SIGKILL)
			var d time.Duration
			c, d = start()
			killed = append(killed, d)
			waitIndexed(b, dir, int64(total))
		}
		// No index at all: start-up catch-up builds it.
		stop(syscall.SIGTERM)
		removeIndex(b, dir)
		var noIndex time.Duration
		c, noIndex = start()
		waitIndexed(b, dir, int64(total))
		stop(syscall.SIGTERM)
		// Cold reindex of the same data, no coordinator running.
		t0 := time.Now()
		if out, err := exec.Command(bin, "reindex", "--data", dir).CombinedOutput(); err != nil {
			b.Fatalf("reindex: %v\n%s", err, out)
		}
		reindex := time.Since(t0)
		c, _ = start()
		median := func(d []time.Duration) float64 { slices.Sort(d); return d[len(d)/2].Seconds() * 1000 }
		b.ReportMetric(median(clean), "restart_ms")
		b.ReportMetric(median(killed), "restart_after_kill_ms")
		b.ReportMetric(noIndex.Seconds()*1000, "start_without_index_ms")
		b.ReportMetric(reindex.Seconds()*1000, "reindex_ms")
		b.Logf("%d records: restarts %v, after SIGKILL %v, without an index %s, cold reindex %s",
			total, clean, killed, noIndex.Round(time.Millisecond), reindex.Round(time.Millisecond))
	}
	stop(syscall.SIGTERM)
}

func removeIndex(b *testing.B, dir string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(datadir.IndexPath(dir) + suffix); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
	}
}

// waitIndexed waits until the index holds n records.
func waitIndexed(b *testing.B, dir string, n int64) {
	ctx := context.Background()
	var got int64
	if !poll(30*time.Minute, func() bool {
		r, err := index.OpenReader(ctx, datadir.IndexPath(dir))
		if err != nil {
			return false
		}
		defer r.Close()
		ros, err := r.Rollouts(ctx)
		if err != nil {
			return false
		}
		got = 0
		for _, ro := range ros {
			got += ro.WatermarkOrdinal
		}
		return got >= n
	}) {
		b.Fatalf("index holds %d records, want %d", got, n)
	}
}

// generate writes threads rollouts of records/threads generated records
// each through the real writer, 32 threads at a time.
func generate(b *testing.B, url string, threads, records int) int {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	per := records / threads
	var next, total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= threads {
					return
				}
				n, err := writeThread(ctx, bus, i, per)
				if err != nil {
					errs <- err
					return
				}
				total.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return int(total.Load())
}

func writeThread(ctx context.Context, bus *stream.Bus, i, per int) (int, error) {
	id := fmt.Sprintf("thread-%d", i)
	recs := gen.All(gen.Config{Seed: int64(i), Records: per})
	recs[0] = rollout.New(time.Now(), 1, rollout.TypeSessionMeta, rollout.MustJSON(rollout.SessionMeta{ID: id, RolloutID: id,
		Source: rollout.Source{Kind: "sim"}, Cwd: fmt.Sprintf("/src/proj-%d", i), SchemaVersion: rollout.Version}))
	l, err := bus.TakeLease(ctx, id, stream.LeaseOptions{Holder: "bench"})
	if err != nil {
		return 0, err
	}
	defer l.Release(ctx)
	w, err := bus.OpenWriter(ctx, l, id, stream.WriterOptions{})
	if err != nil {
		return 0, err
	}
	for _, r := range recs {
		r.Raw, r.Ordinal = nil, 0 // the writer numbers them
		if _, err := w.Append(ctx, r); err != nil {
			return 0, fmt.Errorf("%s: %w", id, err)
		}
	}
	w.Materialize()
	if err := w.Close(ctx); err != nil {
		return 0, err
	}
	return int(w.Acked()), nil
}
