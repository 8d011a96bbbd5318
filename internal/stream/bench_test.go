package stream

// Benchmarks of the bus (docs/BENCHMARKS.md, "Bus"). Each compares the
// writer with raw JetStream on the same embedded server in the same run:
//
//	go test -run '^$' -bench . -benchtime 20000x ./internal/stream/
//
// Custom metrics carry the results; ns/op covers everything a benchmark
// iteration does and is not the figure to read.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

const benchThreads = 64 // rollouts written in parallel

type benchEnv struct {
	bus *Bus
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newBenchEnv(b *testing.B, fsync string) *benchEnv {
	b.Helper()
	ns, err := StartServer(ServerConfig{StoreDir: b.TempDir(), Listen: "127.0.0.1:0", Fsync: fsync, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{bus: openBus(b, nc, SetupConfig{}), nc: nc, js: js}
}

// record300 is a response_item whose line is about 300 bytes.
func record300(tag string, n int) rollout.Record {
	return item(fmt.Sprintf("%s-%d", tag, n), 300-60)
}

// writers opens one writer per thread, each with its session_meta flushed.
func (e *benchEnv) writers(b *testing.B, tag string, n int) []*Writer {
	ctx := context.Background()
	ws := make([]*Writer, n)
	for i := range ws {
		th := fmt.Sprintf("%s-%d", tag, i)
		l := take(b, e.bus, th, "bench", false)
		ws[i] = openWriter(b, e.bus, l, th, WriterOptions{})
		if _, err := ws[i].Append(ctx, meta(th, th)); err != nil {
			b.Fatal(err)
		}
		ws[i].Materialize()
		if err := ws[i].Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// parallel runs f(i, share) on n goroutines splitting total.
func parallel(b *testing.B, n, total int, f func(i, share int) error) time.Duration {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		share := total / n
		if i < total%n {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i, share); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// BenchmarkThroughput: 300-byte records from 64 rollouts in parallel.
// writer: each thread appends its share, then flushes (group commit packs
// whatever queued up). writer-turns: each thread flushes every 8 records, as
// turns with barriers do. raw-async: the same lines as single messages by
// PublishMsgAsync with a msg id, no expected sequence, all acks awaited.
func BenchmarkThroughput(b *testing.B) {
	for _, fsync := range []string{FsyncAlways, FsyncInterval} {
		b.Run("fsync="+fsync, func(b *testing.B) {
			env := newBenchEnv(b, fsync)
			ctx := context.Background()
			lines := make([][]byte, b.N)
			for i := range lines {
				r := record300("raw", i)
				lines[i] = expectLine(r, int64(i+1))
			}
			ws := env.writers(b, "bulk", benchThreads)
			wt := env.writers(b, "turns", benchThreads)
			b.ResetTimer()
			dWriter := parallel(b, benchThreads, b.N, func(i, share int) error {
				for n := 0; n < share; n++ {
					if _, err := ws[i].Append(ctx, record300("w", n)); err != nil {
						return err
					}
				}
				return ws[i].Flush(ctx)
			})
			dTurns := parallel(b, benchThreads, b.N, func(i, share int) error {
				for n := 0; n < share; n++ {
					if _, err := wt[i].Append(ctx, record300("t", n)); err != nil {
						return err
					}
					if n%8 == 7 || n == share-1 {
						if err := wt[i].Flush(ctx); err != nil {
							return err
						}
					}
				}
				return nil
			})
			dRaw := parallel(b, benchThreads, b.N, func(i, share int) error {
				subj := RolloutSubject(fmt.Sprintf("raw-%d", i))
				futures := make([]jetstream.PubAckFuture, 0, share)
				for n := 0; n < share; n++ {
					m := nats.NewMsg(subj)
					m.Data = lines[(i*share+n)%len(lines)]
					m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("raw-%d-%d", i, n))
					f, err := env.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute))
					if err != nil {
						return err
					}
					futures = append(futures, f)
				}
				for _, f := range futures {
					select {
					case <-f.Ok():
					case err := <-f.Err():
						return err
					}
				}
				return nil
			})
			b.StopTimer()
			rate := func(d time.Duration) float64 { return float64(b.N) / d.Seconds() }
			var pubs, pubsT int64
			for i := range ws {
				pubs += ws[i].Stats().Publishes - 1
				pubsT += wt[i].Stats().Publishes - 1
			}
			b.ReportMetric(rate(dWriter), "writer_rec/s")
			b.ReportMetric(rate(dTurns), "turns_rec/s")
			b.ReportMetric(rate(dRaw), "raw_rec/s")
			b.ReportMetric(rate(dWriter)/rate(dRaw), "writer/raw")
			b.ReportMetric(rate(dTurns)/rate(dRaw), "turns/raw")
			b.ReportMetric(float64(b.N)/float64(max(pubs, 1)), "writer_rec/pack")
			b.ReportMetric(float64(b.N)/float64(max(pubsT, 1)), "turns_rec/pack")
		})
	}
}

// BenchmarkFlushLatency: one record appended and flushed, one at a time,
// against a raw synchronous publish with expected sequence and msg id.
func BenchmarkFlushLatency(b *testing.B) {
	for _, fsync := range []string{FsyncAlways, FsyncInterval} {
		b.Run("fsync="+fsync, func(b *testing.B) {
			env := newBenchEnv(b, fsync)
			ctx := context.Background()
			w := env.writers(b, "lat", 1)[0]
			lines := make([][]byte, b.N)
			for i := range lines {
				lines[i] = expectLine(record300("raw", i), int64(i+1))
			}
			flush := make([]time.Duration, b.N)
			raw := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := w.Append(ctx, record300("lat", i)); err != nil {
					b.Fatal(err)
				}
				if err := w.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				flush[i] = time.Since(t0)
			}
			var last uint64
			for i := 0; i < b.N; i++ {
				m := nats.NewMsg(RolloutSubject("raw-lat"))
				m.Data = lines[i]
				t0 := time.Now()
				ack, err := env.js.PublishMsg(ctx, m, jetstream.WithMsgID(fmt.Sprintf("raw-lat:%d-%d:1", i+1, i+1)),
					jetstream.WithExpectLastSequencePerSubject(last))
				if err != nil {
					b.Fatal(err)
				}
				raw[i] = time.Since(t0)
				last = ack.Sequence
			}
			b.StopTimer()
			report := func(name string, d []time.Duration) {
				slices.Sort(d)
				b.ReportMetric(float64(d[len(d)/2].Microseconds()), name+"_p50_µs")
				b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), name+"_p99_µs")
			}
			report("flush", flush)
			report("raw_sync", raw)
		})
	}
}

// BenchmarkPackVsBatch: k records per commit as one packed message (the
// writer's format) or as a JetStream atomic batch of k messages (the
// alternative), sequentially on one rollout and on 8 in parallel, with the
// expected last subject sequence on every commit.
func BenchmarkPackVsBatch(b *testing.B) {
	for _, fsync := range []string{FsyncAlways, FsyncInterval} {
		env := newBenchEnv(b, fsync)
		cfg := RolloutsConfig(1)
		cfg.Name, cfg.Subjects, cfg.AllowAtomicPublish = "BENCHBATCH", []string{"bench.>"}, true
		if _, err := env.js.CreateStream(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
		for _, par := range []int{1, 8} {
			for _, k := range []int{1, 10, 100} {
				for _, enc := range []string{"packed", "batch"} {
					name := fmt.Sprintf("fsync=%s/threads=%d/k=%d/%s", fsync, par, k, enc)
					b.Run(name, func(b *testing.B) {
						line := expectLine(record300("x", 1), 1)
						d := parallel(b, par, b.N, func(i, share int) error {
							subj := fmt.Sprintf("bench.%s.%d.%d.%d.%d", enc, par, k, i, time.Now().UnixNano())
							var seq uint64
							for n := 0; n < share; n += k {
								var err error
								if enc == "packed" {
									seq, err = publishPacked(env, subj, line, k, n, seq)
								} else {
									seq, err = publishBatch(env, subj, line, k, n, seq)
								}
								if err != nil {
									return err
								}
							}
							return nil
						})
						b.ReportMetric(float64(b.N)/d.Seconds(), "rec/s")
					})
				}
			}
		}
	}
}

var batchIDs atomic.Uint64

func publishPacked(env *benchEnv, subj string, line []byte, k, n int, seq uint64) (uint64, error) {
	p := &pack{rollout: strconv.Itoa(len(subj)) + subj[len(subj)-12:], first: int64(n + 1), last: int64(n + k), epoch: 1, data: bytes.Repeat(line, k)}
	m := p.msg()
	m.Subject = subj
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
	ack, err := env.js.PublishMsg(context.Background(), m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// publishBatch sends an atomic batch by hand (nats.go has no helper): k-1
// messages without a reply, then the commit as a request; the expected
// sequence rides on the first message only.
func publishBatch(env *benchEnv, subj string, line []byte, k, n int, seq uint64) (uint64, error) {
	id := "b" + strconv.FormatUint(batchIDs.Add(1), 10)
	for i := 1; i <= k; i++ {
		m := nats.NewMsg(subj)
		m.Data = line
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
		m.Header.Set(jetstream.MsgIDHeader, MsgID("bench", int64(n+i), int64(n+i), 1)+subj)
		if i == 1 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
		}
		if i < k {
			if err := env.nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := env.nc.RequestMsg(m, 30*time.Second)
		if err != nil {
			return 0, err
		}
		var ack struct {
			Seq   uint64              `json:"seq"`
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return 0, err
		}
		if ack.Error != nil {
			return 0, ack.Error
		}
		return ack.Seq, nil
	}
	return seq, nil
}
