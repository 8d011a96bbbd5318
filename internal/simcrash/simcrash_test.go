package simcrash

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

func testEnv(t *testing.T) *Env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if d := os.Getenv("SIMCRASH_DIR"); d != "" {
		dir, _ = os.MkdirTemp(d, "simcrash")
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	e, err := NewEnv(ctx, EnvOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestCleanRuns(t *testing.T) {
	e := testEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, tree := range Trees {
		start := time.Now()
		res := Run(ctx, e, Scenario{Tree: tree, Seed: 1}, fmt.Sprintf("c%d", i))
		t.Logf("%s: %v processes=%d counts=%v effects=%d records=%d acked=%d problems=%v", tree, time.Since(start), res.Processes, res.Counts, res.Effects, res.Records, res.Acked, res.Problems)
		if res.Failed() {
			t.Errorf("%s: %v", tree, res.Problems)
		}
	}
}

func TestEnumerateSeed1(t *testing.T) {
	e := testEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Enumerate(ctx, e, Options{Seeds: []uint64{1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Cells {
		t.Logf("%-8s %-24s %4d scenarios %3d violations %6.2fs", c.Tree, c.Point, c.Scenarios, c.Violations, c.Seconds)
	}
	t.Logf("%d scenarios, %d clean, %d violations in %.1fs", rep.Scenarios, rep.Clean, rep.Violations, rep.ElapsedSec)
	for i, f := range rep.Failed {
		if i < 30 {
			t.Errorf("%s: %v", f.ID(), f.Problems)
		}
	}
}

func TestDebugOne(t *testing.T) {
	id := os.Getenv("SIMCRASH_ONE")
	if id == "" {
		t.Skip("SIMCRASH_ONE not set")
	}
	e := testEnv(t)
	quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	res, err := RunOne(context.Background(), e, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
}

func TestTiming(t *testing.T) {
	if !timingOn {
		t.Skip()
	}
	e := testEnv(t)
	rep, _ := Enumerate(context.Background(), e, Options{Seeds: []uint64{1}, Trees: []string{"tree"}, Parallel: par()})
	t.Logf("%d scenarios %.1fs\n%s", rep.Scenarios, rep.ElapsedSec, TimingReport())
}

func par() int {
	n, _ := strconv.Atoi(os.Getenv("SIMCRASH_PAR"))
	return n
}

func TestAPICount(t *testing.T) {
	if !timingOn {
		t.Skip()
	}
	e := testEnv(t)
	api := func() uint64 {
		v, _ := e.ns.Varz(nil)
		return v.JetStream.Stats.API.Total
	}
	a0 := api()
	res := Run(context.Background(), e, Scenario{Tree: "tree", Seed: 1}, "apic")
	a1 := api()
	res2 := Run(context.Background(), e, Scenario{Tree: "tree", Seed: 1, Point: PointAfterEffect, At: 7}, "apid")
	a2 := api()
	t.Logf("clean: %d API calls %.3fs (%v); crash: %d API calls %.3fs %v\n%s", a1-a0, res.Elapsed, res.Problems, a2-a1, res2.Elapsed, res2.Problems, TimingReport())
}

func TestShardProbe(t *testing.T) {
	if !timingOn {
		t.Skip()
	}
	shards, _ := strconv.Atoi(os.Getenv("SIMCRASH_SHARDS"))
	start := time.Now()
	var wg sync.WaitGroup
	total := 0
	var mu sync.Mutex
	for i := range shards {
		e := testEnv(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seeds []uint64
			for s := i; s < 4; s += shards {
				seeds = append(seeds, uint64(s+1))
			}
			rep, _ := Enumerate(context.Background(), e, Options{Seeds: seeds, Trees: []string{"tree"}, Parallel: par()})
			mu.Lock()
			total += rep.Scenarios
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d shards: %d scenarios in %.1fs: %.1f/s", shards, total, time.Since(start).Seconds(), float64(total)/time.Since(start).Seconds())
}

func TestEnvCost(t *testing.T) {
	if !timingOn {
		t.Skip()
	}
	for range 3 {
		start := time.Now()
		e, err := NewEnv(context.Background(), EnvOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		up := time.Since(start)
		e.Close()
		t.Logf("env up %v, down %v", up, time.Since(start)-up)
	}
}

func TestDebugMirror(t *testing.T) {
	id := os.Getenv("SIMCRASH_MIRROR")
	if id == "" {
		t.Skip()
	}
	ownLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sc, _ := ParseID(id)
	res := RunOwn(context.Background(), t.TempDir(), sc, "dbg")
	t.Logf("%+v", res)
}
