package mirror

// Benchmarks of the mirror (docs/BENCHMARKS.md, "Mirror"):
//
//	go test -run '^$' -bench 'MirrorLag|MirrorCatchUp' -benchtime 1x ./internal/stream/mirror/
//
// Custom metrics carry the results; ns/op is not the figure to read.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

const benchWriters = 64 // rollouts written in parallel, as in the bus benchmarks

func benchInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// record300 is a response_item whose line is about 300 bytes.
func record300(tag string, n int) rollout.Record {
	text := fmt.Sprintf("%s-%d ", tag, n)
	for len(text) < 300-110 {
		text += "lorem ipsum "
	}
	return rollout.New(time.Now(), 0, rollout.TypeResponseItem, rollout.MessageItem("assistant", text))
}

func benchWritersOpen(b *testing.B, e *env, tag string) []*stream.Writer {
	ws := make([]*stream.Writer, benchWriters)
	for i := range ws {
		ws[i] = e.openWriter(fmt.Sprintf("%s-%d", tag, i), nil).w
		if err := ws[i].Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// parallel runs f on every writer and returns the wall time.
func parallel(b *testing.B, ws []*stream.Writer, f func(i int, w *stream.Writer) error) time.Duration {
	var wg sync.WaitGroup
	errs := make(chan error, len(ws))
	start := time.Now()
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i, w); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return time.Since(start)
}

type committed struct {
	ord    int64
	synced time.Time
}

// BenchmarkMirrorLag measures the time from a writer's acknowledgement
// (Flush returning) to the mirror's fsync of the same records, at half the
// writers' maximum load. The maximum is measured first, in the same run,
// with the mirror (and the index behind it, as in serve) running: 64
// rollouts append their share of LOGBOOK_BENCH_RECORDS (default 40,000)
// 300-byte records and flush. Then for LOGBOOK_BENCH_SECONDS (default 10)
// the 64 writers append at a steady half of that rate (a few records every
// 10 ms each; the writer's group commit packs them) while one goroutine per
// writer flushes in a loop: each Flush that returns is a sample (ordinal
// acknowledged, when). A second figure needs no client: every mirrored
// message's lag from its JetStream store timestamp to the fsync.
func BenchmarkMirrorLag(b *testing.B) {
	for range b.N {
		e := newEnv(b)
		var mu sync.Mutex
		commits := map[string][]committed{}
		var batches, msgs int
		var stored []time.Duration
		r := e.start(Config{OnCommit: func(c Commit) {
			mu.Lock()
			defer mu.Unlock()
			for id, ord := range c.Rollouts {
				commits[id] = append(commits[id], committed{ord, c.Synced})
			}
			for _, t := range c.Stored {
				stored = append(stored, c.Synced.Sub(t))
			}
			batches++
			msgs += c.Messages
		}}, os.Getenv("LOGBOOK_BENCH_NOINDEX") == "")
		ctx := context.Background()
		ws := benchWritersOpen(b, e, "lag")
		total := benchInt("LOGBOOK_BENCH_RECORDS", 40000)
		dMax := parallel(b, ws, func(i int, w *stream.Writer) error {
			for n := 0; n < total/benchWriters; n++ {
				if _, err := w.Append(ctx, record300("max", n)); err != nil {
					return err
				}
			}
			return w.Flush(ctx)
		})
		maxRate := float64(total/benchWriters*benchWriters) / dMax.Seconds()
		e.caughtUp(r)
		mu.Lock()
		stored, batches, msgs = stored[:0], 0, 0
		mu.Unlock()

		perWriter := maxRate / 2 / benchWriters // records per second
		const tick = 10 * time.Millisecond
		secs := benchInt("LOGBOOK_BENCH_SECONDS", 10)
		type sample struct {
			ord int64
			at  time.Time
		}
		samples := make([][]sample, len(ws))
		appended := make([]int, len(ws))
		start := time.Now()
		end := start.Add(time.Duration(secs) * time.Second)
		parallel(b, ws, func(i int, w *stream.Writer) error {
			flushed := make(chan error, 1)
			go func() {
				for time.Now().Before(end) {
					if err := w.Flush(ctx); err != nil {
						flushed <- err
						return
					}
					if a := w.Acked(); len(samples[i]) == 0 || a > samples[i][len(samples[i])-1].ord {
						samples[i] = append(samples[i], sample{a, time.Now()})
					}
				}
				flushed <- nil
			}()
			next := start.Add(tick * time.Duration(i) / benchWriters) // stagger the writers
			due := 0.0
			for n := 0; time.Now().Before(end); {
				if d := time.Until(next); d > 0 {
					time.Sleep(d) // pacing, not waiting for a condition
				}
				for due += perWriter * tick.Seconds(); due >= 1; due-- {
					if _, err := w.Append(ctx, record300("paced", n)); err != nil {
						return err
					}
					n++
					appended[i]++
				}
				next = next.Add(tick)
			}
			return <-flushed
		})
		sent := time.Since(start)
		e.caughtUp(r)
		r.stop()

		var lags []time.Duration
		early, records := 0, 0
		for i := range samples {
			records += appended[i]
			cs := commits[ws[i].Rollout()]
			for _, s := range samples[i] {
				j, _ := slices.BinarySearchFunc(cs, s.ord, func(c committed, ord int64) int { return int(c.ord - ord) })
				if j == len(cs) {
					b.Fatalf("rollout %s ordinal %d acknowledged, never mirrored", ws[i].Rollout(), s.ord)
				}
				lag := cs[j].synced.Sub(s.at)
				if lag < 0 {
					early++ // the mirror's fsync returned before the writer saw its ack
					lag = 0
				}
				lags = append(lags, lag)
			}
		}
		q := func(d []time.Duration, p float64) float64 {
			slices.Sort(d)
			return float64(d[int(p*float64(len(d)-1))].Microseconds())
		}
		b.ReportMetric(maxRate, "max_rec/s")
		b.ReportMetric(float64(records)/sent.Seconds(), "load_rec/s")
		b.ReportMetric(q(lags, 0.5), "lag_p50_µs")
		b.ReportMetric(q(lags, 0.99), "lag_p99_µs")
		b.ReportMetric(float64(early)/float64(len(lags)), "early_frac")
		b.ReportMetric(q(stored, 0.5), "store_lag_p50_µs")
		b.ReportMetric(q(stored, 0.99), "store_lag_p99_µs")
		b.ReportMetric(float64(msgs)/float64(max(batches, 1)), "msgs/batch")
		b.Logf("%d flush samples, %d messages, %d batches over %s", len(lags), msgs, batches, sent.Round(time.Millisecond))
	}
}

// BenchmarkMirrorCatchUp measures how fast a stopped mirror catches up:
// LOGBOOK_BENCH_RECORDS (default 200,000) 300-byte records in 64 rollouts
// are published while it is stopped, then it is started and timed to the
// end of the stream, without and with the index behind it.
func BenchmarkMirrorCatchUp(b *testing.B) {
	for _, withIndex := range []bool{false, true} {
		b.Run(fmt.Sprintf("index=%v", withIndex), func(b *testing.B) {
			for range b.N {
				e := newEnv(b)
				ctx := context.Background()
				ws := benchWritersOpen(b, e, "catchup")
				total := benchInt("LOGBOOK_BENCH_RECORDS", 200000)
				parallel(b, ws, func(i int, w *stream.Writer) error {
					for n := 0; n < total/benchWriters; n++ {
						if _, err := w.Append(ctx, record300("c", n)); err != nil {
							return err
						}
						if n%256 == 255 {
							if err := w.Flush(ctx); err != nil {
								return err
							}
						}
					}
					return w.Flush(ctx)
				})
				last := e.lastSeq()
				done := make(chan time.Time, 1)
				start := time.Now()
				r := e.start(Config{OnCommit: func(c Commit) {
					if c.Seq == last {
						done <- time.Now()
					}
				}}, withIndex)
				end := <-done
				var indexed time.Duration
				if withIndex {
					want := uint64(total/benchWriters*benchWriters + benchWriters)
					waitFor(b, 10*time.Minute, "the index", func() bool { return r.m.Status().Indexed >= want })
					indexed = time.Since(start)
				}
				r.stop()
				st := r.m.Status()
				b.ReportMetric(float64(st.Records)/end.Sub(start).Seconds(), "mirror_rec/s")
				b.ReportMetric(float64(st.Records)/float64(st.Batches), "rec/batch")
				if withIndex {
					b.ReportMetric(float64(st.Indexed)/indexed.Seconds(), "indexed_rec/s")
				}
			}
		})
	}
}
