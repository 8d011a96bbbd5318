package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror/mirrortest"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// genThread writes a generated rollout of n records (gen seed: thread
// thread-<seed>, rollout rollout-<seed>) through a writer that then
// vanishes: its lease is released, its last turn may be open. It returns
// the thread id, the rollout id and the records.
func genThread(t testing.TB, bus *stream.Bus, seed int64, n int) (string, string, []rollout.Record) {
	t.Helper()
	recs := gen.All(gen.Config{Seed: seed, Records: n, CompactEvery: 500, MaxRollback: 2})
	th, rid := fmt.Sprintf("thread-%d", seed), fmt.Sprintf("rollout-%d", seed)
	ctx := context.Background()
	lease, err := bus.TakeLease(ctx, th, stream.LeaseOptions{Holder: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Threads().Create(ctx, th, []byte(rid)); err != nil {
		t.Fatal(err)
	}
	appendRecs(t, bus, lease, rid, recs)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return th, rid, recs
}

func appendRecs(t testing.TB, bus *stream.Bus, lease *stream.Lease, rid string, recs []rollout.Record) {
	t.Helper()
	ctx := context.Background()
	w, err := bus.OpenWriter(ctx, lease, rid, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// more continues a generated thread with k more records (same generator).
func more(t testing.TB, bus *stream.Bus, th, rid string, seed int64, n, k int) {
	t.Helper()
	all := gen.All(gen.Config{Seed: seed, Records: n + k, CompactEvery: 500, MaxRollback: 2})
	lease, err := bus.TakeLease(context.Background(), th, stream.LeaseOptions{Holder: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	recs := all[n : n+k]
	for i := range recs { // after whatever a resume appended
		recs[i].Raw, recs[i].Ordinal, recs[i].CRC = nil, 0, ""
	}
	appendRecs(t, bus, lease, rid, recs)
}

// oldPath is what Resume computed before it read the mirror: the thread
// read whole from the bus (ops.Load) and replayed.
func oldPath(t testing.TB, bus *stream.Bus, th string) *replay.State {
	t.Helper()
	src, err := ops.Load(context.Background(), bus, th)
	if err != nil {
		t.Fatal(err)
	}
	st, err := replay.Fast(src.View, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func stateJSON(t testing.TB, st *replay.State) []byte {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResumeFromMirrorEqualsBusRead: whatever the mirror holds of a thread
// — all of it, all but a suffix, nothing, a damaged copy — Resume with the
// data dir decides and writes exactly what the whole read from the bus
// decides (the plan, the records appended, the state after), and reads
// from the bus only what the mirror lacks.
func TestResumeFromMirrorEqualsBusRead(t *testing.T) {
	const n = 1500
	cases := []struct {
		name     string
		seed     int64
		suffix   int                 // records written after the mirror stopped
		unsynced bool                // the mirror never saw the rollout
		damage   func(path string)   // done to the mirror file
		fallback bool                // the bus is read from the start
		noDir    bool                // no data dir at all
		check    func(ops.ReadStats) // more about what was read
	}{
		{name: "mirror current", seed: 11},
		{name: "suffix not yet mirrored", seed: 12, suffix: 137},
		{name: "whole rollout unmirrored", seed: 13, unsynced: true, fallback: true},
		{name: "no data dir", seed: 14, noDir: true},
		{name: "damaged tail", seed: 15, fallback: true, damage: func(path string) { flipNear(t, path, 1) }},
		{name: "damaged inside the region", seed: 16, fallback: true, damage: func(path string) { flipNear(t, path, 3) }},
		{name: "torn tail (an append in progress)", seed: 17, damage: func(path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"timestamp":"2026-`)
			f.Close()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := streamtest.New(t, streamtest.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dir := t.TempDir()
			if c.unsynced {
				mirrortest.Sync(t, tb.Bus, dir) // the mirror exists, and holds nothing of it
			}
			th, rid, _ := genThread(t, tb.Bus, c.seed, n)
			if !c.unsynced {
				mirrortest.Sync(t, tb.Bus, dir)
			}
			if c.suffix > 0 {
				more(t, tb.Bus, th, rid, c.seed, n, c.suffix)
			}
			if c.damage != nil {
				c.damage(datadir.MirrorPath(dir, rid))
			}
			before := oldPath(t, tb.Bus, th)
			wantPlan, err := Decide(th, before, nil)
			if err != nil {
				t.Fatal(err)
			}
			busLen := lastOrdinal(t, tb.Bus, rid)

			opt := ResumeOptions{Holder: "coordinator", DataDir: dir}
			if c.noDir {
				opt.DataDir = ""
			}
			rep, err := Resume(ctx, tb.Bus, th, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep.Plan, wantPlan) {
				t.Errorf("plan %+v, want %+v", rep.Plan, wantPlan)
			}
			want := 0
			if wantPlan.StaleTurn != nil {
				want = 1
			}
			if rep.Appended != want || lastOrdinal(t, tb.Bus, rid) != busLen+int64(want) {
				t.Errorf("appended %d (bus %d -> %d), want %d", rep.Appended, busLen, lastOrdinal(t, tb.Bus, rid), want)
			}
			after := oldPath(t, tb.Bus, th)
			if got, want := stateJSON(t, rep.State), stateJSON(t, after); !bytes.Equal(got, want) {
				t.Errorf("state after the resume differs from the bus read:\n got %s\nwant %s", got, want)
			}
			r := rep.Read
			switch {
			case c.noDir:
				if r.MirrorOrdinal != 0 || r.BusRecords != busLen+int64(want) {
					t.Errorf("without a data dir: read %+v, want all %d records from the bus", r, busLen)
				}
			case c.fallback:
				if r.Fallback == "" || r.MirrorOrdinal != 0 || r.BusRecords < busLen {
					t.Errorf("read %+v: want the whole rollout from the bus, and why", r)
				}
			default:
				if r.Fallback != "" || r.MirrorOrdinal != int64(n) || r.BusRecords != int64(c.suffix+want) {
					t.Errorf("read %+v: want ordinals 1-%d from the mirror and only %d from the bus", r, n, c.suffix+want)
				}
			}
			t.Logf("%s: plan stale=%v unknown=%d; read %+v", c.name, wantPlan.StaleTurn != nil, len(wantPlan.Unknown), r)
		})
	}
}

// flipNear damages the k-th line from the end of a mirror file (its crc no
// longer matches).
func flipNear(t testing.TB, path string, k int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(data)
	for i := 0; i < k; i++ {
		end = bytes.LastIndexByte(data[:end-1], '\n') + 1
	}
	line := data[end:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	p := bytes.Index(line, []byte(`"payload":`))
	if p < 0 {
		t.Fatalf("no payload in %q", line)
	}
	i := end + p + len(`"payload":`) + 2
	data[i] ^= 0x01 // inside the payload: still JSON-ish, the crc fails
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestResumeReadsOnlyTheSuffix is issue 8 item 11: with the mirror up to
// date, resuming a long thread reads from the bus only what the resume
// itself appended (and a handful of gets to find the mirror's last pack and
// check the tail), not the rollout; with the mirror behind, only what it
// lacks. Without the mirror, the counters show the whole rollout read.
func TestResumeReadsOnlyTheSuffix(t *testing.T) {
	tb := streamtest.New(t, streamtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const n = 20000
	th, rid, _ := genThread(t, tb.Bus, 21, n)
	mirrortest.Sync(t, tb.Bus, dir)

	measure := func(opt ResumeOptions) (*ResumeReport, int64) {
		t.Helper()
		before := tb.RolloutGets()
		rep, err := Resume(ctx, tb.Bus, th, opt)
		if err != nil {
			t.Fatal(err)
		}
		return rep, tb.RolloutGets() - before
	}
	rep, gets := measure(ResumeOptions{Holder: "coordinator", DataDir: dir})
	if rep.Read.MirrorOrdinal != n || rep.Read.BusRecords != int64(rep.Appended) || rep.Read.Fallback != "" {
		t.Errorf("mirror current: read %+v, appended %d: want only the appended records from the bus", rep.Read, rep.Appended)
	}
	if gets > 40 {
		t.Errorf("mirror current: %d message gets, want a few (tail, search, writer check, read-back)", gets)
	}
	t.Logf("mirror current: %d gets, read %+v, appended %d, state read %d records", gets, rep.Read, rep.Appended, rep.State.Replay.RecordsRead)

	// The mirror behind by 300 records (and by what the first resume appended).
	more(t, tb.Bus, th, rid, 21, n, 300)
	behind := int64(300 + rep.Appended)
	rep, gets = measure(ResumeOptions{Holder: "coordinator", DataDir: dir})
	if rep.Read.MirrorOrdinal != n || rep.Read.BusRecords != behind+int64(rep.Appended) {
		t.Errorf("mirror behind by %d: read %+v, appended %d", behind, rep.Read, rep.Appended)
	}
	if gets > 40+behind {
		t.Errorf("mirror behind by %d: %d message gets", behind, gets)
	}
	t.Logf("mirror behind: %d gets, read %+v", gets, rep.Read)

	// Without the data dir: the whole rollout, from the bus.
	total := lastOrdinal(t, tb.Bus, rid)
	rep, gets = measure(ResumeOptions{Holder: "coordinator"})
	if rep.Read.BusRecords < total {
		t.Errorf("bus only: read %+v of %d records", rep.Read, total)
	}
	t.Logf("bus only: %d gets, read %+v", gets, rep.Read)
}
