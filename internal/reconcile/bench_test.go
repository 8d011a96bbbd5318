package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror/mirrortest"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// BenchmarkResume measures a resume of a crashed thread (a stale turn to
// abort) whose rollout holds 1k, 10k and 100k generated records, with the
// data dir's mirror current (mirror) and without a data dir (bus: the whole
// rollout read from the bus, as every resume did before). Each iteration
// first (timer stopped) opens a turn as a crashing agent would and brings
// the mirror up to date; the timed part is reconcile.Resume: read, replay,
// plan, one turn_aborted appended through a writer, the state after. It
// reports the records read from the bus, the ROLLOUTS message gets, the
// records the replay read and the warnings the state carries (each needs
// its line number, counted from the head of the file) per resume; it
// asserts no time (make bench
// BENCH=resume; docs/BENCHMARKS.md).
func BenchmarkResume(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		tb := streamtest.New(b, streamtest.Options{})
		dir := b.TempDir()
		seed := int64(100 + n)
		th, rid, _ := genThread(b, tb.Bus, seed, n)
		for _, mode := range []string{"mirror", "bus"} {
			b.Run(fmt.Sprintf("%s/records=%d", mode, n), func(b *testing.B) {
				opt := ResumeOptions{Holder: "coordinator"}
				if mode == "mirror" {
					opt.DataDir = dir
				}
				var busRecords, gets, replayed, warnings int64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					crashTurn(b, tb.Bus, th, rid, fmt.Sprintf("bench-%s-%d", mode, i))
					if mode == "mirror" {
						mirrortest.Sync(b, tb.Bus, dir)
					}
					before := tb.RolloutGets()
					b.StartTimer()
					rep, err := Resume(context.Background(), tb.Bus, th, opt)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					if rep.Appended != 1 {
						b.Fatalf("appended %d, want the stale turn's abort", rep.Appended)
					}
					if mode == "mirror" && (rep.Read.Fallback != "" || rep.Read.BusRecords != 1) {
						b.Fatalf("mirror current: read %+v, want only the abort read back", rep.Read)
					}
					busRecords += rep.Read.BusRecords
					gets += tb.RolloutGets() - before
					replayed += int64(rep.State.Replay.RecordsRead)
					warnings += int64(len(rep.State.Warnings))
					b.StartTimer()
				}
				b.ReportMetric(float64(busRecords)/float64(b.N), "bus_records/op")
				b.ReportMetric(float64(gets)/float64(b.N), "gets/op")
				b.ReportMetric(float64(replayed)/float64(b.N), "replayed/op")
				b.ReportMetric(float64(warnings)/float64(b.N), "warnings/op")
			})
		}
	}
}

// crashTurn opens a turn on the thread and vanishes (lease released, the
// turn never ends): what a resume finds after a crash.
func crashTurn(b *testing.B, bus *stream.Bus, th, rid, turn string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := bus.TakeLease(ctx, th, stream.LeaseOptions{Holder: "agent"})
	if err != nil {
		b.Fatal(err)
	}
	defer lease.Release(ctx)
	rb := rollout.Builder{}
	recs := []rollout.Record{rb.TaskStarted(turn), rb.UserMessage("go on")}
	for i := range recs {
		recs[i].Ordinal = 0 // the writer's next
	}
	appendRecs(b, bus, lease, rid, recs)
	if err := lease.Release(ctx); err != nil {
		b.Fatal(err)
	}
}
