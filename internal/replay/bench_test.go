package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Benchmarks of issue "foundation" (make bench). The generated files are
// cached under $TMPDIR/logbook-bench so repeated runs measure, not generate.

var benchCache = filepath.Join(os.TempDir(), "logbook-bench")

var benchFiles sync.Map

// benchLog returns a generated rollout of n records: turns with calls,
// settings, world-state patches, rollbacks and a checkpoint every 1,000
// records, as a long-lived thread looks.
func benchLog(b *testing.B, n int) string {
	b.Helper()
	key := fmt.Sprintf("gen-v2-%d.jsonl", n)
	if p, ok := benchFiles.Load(key); ok {
		return p.(string)
	}
	path := filepath.Join(benchCache, key)
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(benchCache, 0o755); err != nil {
			b.Fatal(err)
		}
		tmp := path + ".tmp"
		f, err := os.Create(tmp)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		g := gen.New(gen.Config{Seed: 7, Records: n, CompactEvery: 1000, MaxRollback: 2})
		var buf []byte
		for i := 0; i < n; i++ {
			r := g.Next()
			buf = append(r.Append(buf[:0]), '\n')
			if _, err := w.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			b.Fatal(err)
		}
	}
	benchFiles.Store(key, path)
	return path
}

func fileSize(b *testing.B, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

func report(b *testing.B, records int, bytes int64) {
	secs := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(records)/secs, "records/s")
	b.ReportMetric(float64(bytes)/secs/1e6, "MB/s")
}

// BenchmarkNaive1M: the naive fold over a 1,000,000-record rollout (turns,
// calls, settings, world-state patches, rollbacks of one or two turns, a
// checkpoint every 1,000 records).
func BenchmarkNaive1M(b *testing.B) {
	path := benchLog(b, 1_000_000)
	log, err := rollout.OpenFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Naive(log, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	report(b, 1_000_000, fileSize(b, path))
}

// BenchmarkFloorSplitLines: reading the same file and splitting its lines,
// nothing else; no replay can beat it.
func BenchmarkFloorSplitLines(b *testing.B) {
	path := benchLog(b, 1_000_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), rollout.MaxLineBytes)
		n := 0
		for sc.Scan() {
			n++
		}
		f.Close()
		if n != 1_000_000 {
			b.Fatalf("%d lines", n)
		}
	}
	report(b, 1_000_000, fileSize(b, path))
}

// BenchmarkFloorJSONEnvelope: decoding every line with plain encoding/json
// into the envelope, the payload kept raw (what a straightforward reader does).
func BenchmarkFloorJSONEnvelope(b *testing.B) {
	benchJSONFloor(b, func(line []byte) error {
		var env struct {
			Timestamp string          `json:"timestamp"`
			Ordinal   int64           `json:"ordinal"`
			Type      string          `json:"type"`
			Payload   json.RawMessage `json:"payload"`
			CRC       string          `json:"crc"`
		}
		return json.Unmarshal(line, &env)
	})
}

// BenchmarkFloorJSONFull: decoding every line with plain encoding/json into
// generic values.
func BenchmarkFloorJSONFull(b *testing.B) {
	benchJSONFloor(b, func(line []byte) error {
		var v map[string]any
		return json.Unmarshal(line, &v)
	})
}

func benchJSONFloor(b *testing.B, decode func([]byte) error) {
	path := benchLog(b, 1_000_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), rollout.MaxLineBytes)
		for sc.Scan() {
			if err := decode(sc.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
	report(b, 1_000_000, fileSize(b, path))
}

// BenchmarkFast: the resume path over the same tail after 10k, 100k and 1M
// records of history.
func BenchmarkFast(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			path := filepath.Join(benchCache, fmt.Sprintf("flat-%d.jsonl", n))
			if _, err := os.Stat(path); err != nil {
				if err := os.MkdirAll(benchCache, 0o755); err != nil {
					b.Fatal(err)
				}
				tmp := writeHistoryAndTail(b, benchCache, n)
				if err := os.Rename(tmp, path); err != nil {
					b.Fatal(err)
				}
			}
			log, err := rollout.OpenFile(path)
			if err != nil {
				b.Fatal(err)
			}
			var st *State
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if st, err = Fast(log, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.Replay.RecordsRead), "records-read")
		})
	}
}

// BenchmarkPeakHeap: the largest live heap while replaying, both ways, over
// generated rollouts of 100k and 1M records. Bounded memory shows as the same
// peak for both sizes.
func BenchmarkPeakHeap(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		for _, mode := range []string{"naive", "fast"} {
			b.Run(fmt.Sprintf("%s/records=%d", mode, n), func(b *testing.B) {
				path := benchLog(b, n)
				log, err := rollout.OpenFile(path)
				if err != nil {
					b.Fatal(err)
				}
				run := Naive
				if mode == "fast" {
					run = Fast
				}
				var peak uint64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p, err := peakHeap(func() error { _, err := run(log, Options{}); return err })
					if err != nil {
						b.Fatal(err)
					}
					peak = max(peak, p)
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(fileSize(b, path))/(1<<20), "file-MiB")
			})
		}
	}
}

// peakHeap runs fn and samples the live heap every millisecond; it returns
// the peak above the heap before fn.
func peakHeap(fn func() error) (uint64, error) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[1].Value.Uint64()
	}
	base := read()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, read())
			}
		}
	}()
	err := fn()
	close(done)
	wg.Wait()
	peak = max(peak, read())
	if peak < base {
		return 0, err
	}
	return peak - base, err
}
