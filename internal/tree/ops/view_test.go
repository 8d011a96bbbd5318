package ops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror/mirrortest"
)

// viewBytes reads a view forward: every record's line and virtual offset.
func viewBytes(t *testing.T, log rollout.Log) string {
	t.Helper()
	cur, err := log.Forward(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var b strings.Builder
	if err := rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		fmt.Fprintf(&b, "%d %s\n", e.Offset, e.Raw)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestLoadViewFromTheMirror: a reverted thread's view — its own rollout
// and the frozen prefix of the sealed one its history_base names — is read
// from the mirror files, the bus past them only, and is byte for byte the
// view Load reads from the bus; a base whose mirror file is missing is read
// from the bus, and says so.
func TestLoadViewFromTheMirror(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	a := newAgent(t, bus.Bus, "G", "rG1", rollout.HistoryPaginated)
	for i := 1; i <= 40; i++ {
		a.turn(fmt.Sprintf("t%d", i), true)
	}
	a.stop()
	res, err := Revert(ctx, bus.Bus, "G", "t30")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mirrortest.Sync(t, bus.Bus, dir)

	want := func() string {
		src, err := Load(ctx, bus.Bus, "G")
		if err != nil {
			t.Fatal(err)
		}
		return viewBytes(t, src.View)
	}
	v, err := LoadView(ctx, bus.Bus, "G", ViewOptions{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if v.Current != res.Rollout || v.Read.MirrorBases != 1 || v.Read.BusRecords != 0 || v.Read.Fallback != "" || v.Read.MirrorOrdinal == 0 {
		t.Errorf("read %+v of %s: want everything from the mirror", v.Read, v.Current)
	}
	if got, w := viewBytes(t, v.Log), want(); got != w {
		t.Fatalf("view from the mirror differs from the bus's:\n%s\nwant\n%s", got, w)
	}
	tail, _, lastSeq, err := bus.ValidTail(ctx, res.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	if v.Known.Tail != tail || v.Known.LastSeq != lastSeq {
		t.Errorf("known tail %+v (last seq %d), want %+v (%d)", v.Known.Tail, v.Known.LastSeq, tail, lastSeq)
	}

	// Three turns the mirror has not seen: only they come from the bus,
	// and Extend reads what comes after.
	lease, err := bus.TakeLease(ctx, "G", stream.LeaseOptions{Holder: "agent-G"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.OpenWriter(ctx, lease, res.Rollout, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := rollout.Builder{Next: w.Next()}
	for _, r := range []rollout.Record{b.TaskStarted("n1"), b.UserMessage("x"), b.TaskComplete("n1")} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v, err = LoadView(ctx, bus.Bus, "G", ViewOptions{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if v.Read.BusRecords != 3 || v.Read.Fallback != "" {
		t.Errorf("mirror behind by 3: read %+v", v.Read)
	}
	if got, w := viewBytes(t, v.Log), want(); got != w {
		t.Fatalf("view (mirror behind) differs from the bus's:\n%s\nwant\n%s", got, w)
	}
	if _, err := w.Append(ctx, b.Message("assistant", "later")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lease.Release(context.Background())
	if n, err := v.Extend(ctx, bus.Bus); err != nil || n != 1 {
		t.Fatalf("extend: %d records, %v; want 1", n, err)
	}
	if got, w := viewBytes(t, v.Log), want(); got != w {
		t.Fatalf("extended view differs from the bus's:\n%s\nwant\n%s", got, w)
	}

	// The sealed rollout's mirror file gone: the base comes from the bus.
	if err := os.Remove(datadir.MirrorPath(dir, "rG1")); err != nil {
		t.Fatal(err)
	}
	v, err = LoadView(ctx, bus.Bus, "G", ViewOptions{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if v.Read.MirrorBases != 0 || v.Read.BusRecords == 0 || !strings.Contains(v.Read.Fallback, "base rG1: no mirror file") {
		t.Errorf("base without a mirror file: read %+v", v.Read)
	}
	if got, w := viewBytes(t, v.Log), want(); !bytes.Equal([]byte(got), []byte(w)) {
		t.Fatalf("view (base from the bus) differs from the bus's:\n%s\nwant\n%s", got, w)
	}
}
