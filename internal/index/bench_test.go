package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Benchmarks. They measure and report; they assert nothing. Figures and how
// to reproduce them: docs/BENCHMARKS.md, "Index".
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 60m ./internal/index/
//
// The big data set (10,000 threads, 1,000,000 records) is built once per
// run into a temporary directory, on first use, and removed by TestMain.

const (
	benchThreads = 10_000
	benchRecords = 1_000_000
)

// benchWords vary the generated threads' working directories, so searches
// can be rare (one thread), medium (one in twelve) or common (all).
var benchWords = []string{"billing", "auth", "search", "ingest", "payments", "infra", "docs", "mobile", "web", "ml", "data", "ops"}

type benchSet struct {
	once sync.Once
	dir  string
	err  error
}

// benchFixtures are the data sets shared by the benchmarks of one run.
var benchFixtures struct {
	big, million benchSet
	tmp          []string
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range benchFixtures.tmp {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// writeBenchRollouts writes n generated rollouts of about per records each,
// thread-<i> in rollout-<i>, with a varied cwd.
func writeBenchRollouts(dir string, n, per int) (records int, err error) {
	rd := datadir.RolloutsDir(dir)
	if err := os.MkdirAll(rd, 0o755); err != nil {
		return 0, err
	}
	for i := range n {
		recs := gen.All(gen.Config{Seed: int64(i), Records: per})
		b := rollout.Builder{Next: 1, Now: func() time.Time {
			return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
		}}
		recs[0] = b.Meta(rollout.SessionMeta{ID: fmt.Sprintf("thread-%d", i), RolloutID: fmt.Sprintf("rollout-%d", i),
			Source: rollout.Source{Kind: "sim"}, Cwd: fmt.Sprintf("/src/%s/proj-%d", benchWords[i%len(benchWords)], i)})
		if err := os.WriteFile(filepath.Join(rd, fmt.Sprintf("rollout-%d.jsonl", i)), rollout.MemOf("", recs).Bytes(), 0o644); err != nil {
			return 0, err
		}
		records += len(recs)
	}
	return records, nil
}

// bigSet is the 10,000-thread, 1,000,000-record data dir, indexed.
func bigSet(b *testing.B) string {
	s := &benchFixtures.big
	s.once.Do(func() {
		s.dir, s.err = os.MkdirTemp("", "logbook-bench-index-")
		if s.err != nil {
			return
		}
		benchFixtures.tmp = append(benchFixtures.tmp, s.dir)
		t0 := time.Now()
		if _, s.err = writeBenchRollouts(s.dir, benchThreads, benchRecords/benchThreads); s.err != nil {
			return
		}
		_, s.err = Rebuild(context.Background(), s.dir, Options{}, nil)
		b.Logf("data set: %d threads, %d records, built and indexed in %v", benchThreads, benchRecords, time.Since(t0).Round(time.Second))
	})
	if s.err != nil {
		b.Fatal(s.err)
	}
	return s.dir
}

// BenchmarkCatchUp: the catch-up rate building an index from mirror files,
// in the default batches, and as the mirror drives it: one CatchUpRollout
// per group of 10 records appended.
func BenchmarkCatchUp(b *testing.B) {
	b.Run("cold/200k", func(b *testing.B) {
		dir := b.TempDir()
		n, err := writeBenchRollouts(dir, 100, 2000)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			os.Remove(datadir.IndexPath(dir))
			ix, err := Open(context.Background(), dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := ix.CatchUp(context.Background(), nil); err != nil {
				b.Fatal(err)
			}
			ix.Close()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("appends-of-10", func(b *testing.B) {
		dir := b.TempDir()
		recs := gen.All(gen.Config{Seed: 9, Records: 20_000})
		data := rollout.MemOf("", recs).Bytes()
		es := memEntries(b, rollout.MemOf("", recs))
		ix, err := Open(context.Background(), dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer ix.Close()
		f, err := os.Create(filepath.Join(dir, datadir.Rollouts, "rollout-9.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.ResetTimer()
		done := 0
		for range b.N {
			for i := 0; i < len(es); i += 10 {
				j := min(i+10, len(es))
				f.Write(data[es[i].Offset:es[j-1].End()])
				if _, err := ix.CatchUpRollout(context.Background(), "rollout-9"); err != nil {
					b.Fatal(err)
				}
			}
			done += len(es)
			b.StopTimer()
			f.Truncate(0)
			f.Seek(0, 0)
			ix.Close()
			os.Remove(datadir.IndexPath(dir))
			if ix, err = Open(context.Background(), dir, Options{}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkReindex: a cold reindex of 10,000 threads and 1,000,000 records.
func BenchmarkReindex(b *testing.B) {
	dir := bigSet(b)
	b.ResetTimer()
	for range b.N {
		if _, err := Rebuild(context.Background(), dir, Options{}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchRecords*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkThreads: list latency at 10,000 threads and 1,000,000 records.
func BenchmarkThreads(b *testing.B) {
	dir := bigSet(b)
	ctx := context.Background()
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	// A cursor 9,000 threads deep.
	deep := ThreadQuery{Limit: 1000}
	for range 9 {
		p, err := r.Threads(ctx, deep)
		if err != nil {
			b.Fatal(err)
		}
		deep.Cursor = p.NextCursor
	}
	deep.Limit = DefaultLimit
	for _, c := range []struct {
		name string
		q    ThreadQuery
	}{
		{"first-page", ThreadQuery{}},
		{"deep-page", deep},
		{"search-rare", ThreadQuery{Search: "proj-4242"}},
		{"search-medium", ThreadQuery{Search: "payments"}},
		{"search-common", ThreadQuery{Search: "request"}},
		{"search-none", ThreadQuery{Search: "nowhere"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if _, err := r.Threads(ctx, c.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShow: a thread's state from the index and its mirror file.
func BenchmarkShow(b *testing.B) {
	dir := bigSet(b)
	ctx := context.Background()
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	b.ResetTimer()
	for range b.N {
		if _, err := Show(ctx, r, dir, fmt.Sprintf("thread-%d", rng.IntN(benchThreads)), replay.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestart: what an index costs a coordinator's start-up with
// 10,000 rollouts indexed and nothing new in the mirror: Open (every
// watermark checked against its mirror file) and a CatchUp that finds
// nothing to do.
func BenchmarkRestart(b *testing.B) {
	dir := bigSet(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		ix, err := Open(ctx, dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := ix.CatchUp(ctx, nil)
		if err != nil || rep.Records != 0 || len(rep.Reset) != 0 {
			b.Fatalf("restart caught up %d records, reset %v: %v", rep.Records, rep.Reset, err)
		}
		ix.Close()
	}
}
