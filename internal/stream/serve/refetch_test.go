package serve

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

// TestTruncatedWhileStoppedRefetched: a mirror file cut short (at a line
// boundary) while the coordinator is stopped is completed from the bus at
// start-up; later records are mirrored, none quarantined as ordinal_gap.
func TestTruncatedWhileStoppedRefetched(t *testing.T) {
	ns := externalNATS(t, "ext")
	dir := t.TempDir()
	_, stop := start(t, Config{DataDir: dir, NATSURL: ns.ClientURL(), Listen: "127.0.0.1:0"})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	const id = "ro-cut"
	write := func(n int, tag string) {
		t.Helper()
		l, err := bus.TakeLease(ctx, id, stream.LeaseOptions{Holder: "test"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		w, err := bus.OpenWriter(ctx, l, id, stream.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close(ctx)
		if w.Next() == 1 {
			m := rollout.SessionMeta{ID: id, RolloutID: id, Source: rollout.Source{Kind: "sim"}, Cwd: "/w",
				HistoryMode: rollout.HistoryLegacy, SchemaVersion: rollout.Version}
			if _, err := w.Append(ctx, rollout.New(time.Now(), 0, rollout.TypeSessionMeta, rollout.MustJSON(m))); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < n; i++ {
			if _, err := w.Append(ctx, rollout.New(time.Now(), 0, rollout.TypeResponseItem, rollout.MessageItem("assistant", fmt.Sprint(tag, i)))); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil { // one message per record
				t.Fatal(err)
			}
		}
	}
	busLines := func() []byte {
		t.Helper()
		es, err := bus.ReadAll(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, e := range es {
			b.Write(e.Record.Raw)
			b.WriteByte('\n')
		}
		return b.Bytes()
	}
	path := filepath.Join(dir, datadir.Rollouts, id+datadir.JSONLExt)
	mirrored := func(what string) {
		t.Helper()
		want := busLines()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, _ := os.ReadFile(path)
			if bytes.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the mirror file holds %d lines, the bus %d", what, bytes.Count(got, []byte("\n")), bytes.Count(want, []byte("\n")))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	write(20, "one")
	mirrored("before the stop")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := 0
	for i := 0; i < 8; i++ {
		cut += bytes.IndexByte(b[cut:], '\n') + 1
	}
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}

	_, stop2 := start(t, Config{DataDir: dir, NATSURL: ns.ClientURL(), Listen: "127.0.0.1:0"})
	mirrored("after the restart")
	write(5, "two")
	mirrored("after more records")
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	qs, err := mirror.ReadQuarantine(dir)
	if err != nil || len(qs) != 0 {
		t.Fatalf("quarantine %+v (%v), want none", qs, err)
	}
}
