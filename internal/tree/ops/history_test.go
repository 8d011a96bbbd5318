package ops

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

func TestRollback(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	a := newAgent(t, bus.Bus, "L", "rL", rollout.HistoryLegacy).turn("t1", true).turn("t2", true).flush()
	if _, err := Rollback(ctx, bus.Bus, "L", 1, "test"); !errors.Is(err, ErrActive) {
		t.Fatalf("rollback of an active thread: %v, want ErrActive", err)
	}
	a.stop()
	// More user turns than are in effect: refused, naming them; nothing written.
	if _, err := Rollback(ctx, bus.Bus, "L", 3, "test"); !errors.Is(err, ErrTooFewTurns) || !strings.Contains(err.Error(), "3 asked, 2 in effect (t1, t2)") {
		t.Fatalf("rollback 3 of 2 turns: %v, want ErrTooFewTurns naming t1, t2", err)
	}
	res, err := Rollback(ctx, bus.Bus, "L", 1, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !equal(res.Undone, []string{"t2"}) || res.State.Model != "model-t1" {
		t.Errorf("undone %v, model %s (a refused rollback wrote something?)", res.Undone, res.State.Model)
	}
	newAgent(t, bus.Bus, "G", "rG", rollout.HistoryPaginated).turn("t1", true).stop()
	if _, err := Rollback(ctx, bus.Bus, "G", 1, "test"); !errors.Is(err, ErrPaginated) {
		t.Errorf("rollback of a paginated thread: %v, want ErrPaginated", err)
	}
	if _, err := Revert(ctx, bus.Bus, "L", "t1"); !errors.Is(err, ErrLegacy) {
		t.Errorf("revert of a legacy thread: %v, want ErrLegacy", err)
	}
}

func TestRevert(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	newAgent(t, bus.Bus, "G", "rG1", rollout.HistoryPaginated).turn("t1", true).turn("t2", true).turn("t3", true).stop()
	res, err := Revert(ctx, bus.Bus, "G", "t2")
	if err != nil {
		t.Fatal(err)
	}
	if res.Sealed != "rG1" || res.Rollout == "rG1" || !equal(res.Undone, []string{"t2", "t3"}) {
		t.Errorf("revert: %+v", res)
	}
	if got := texts(res.State); !equal(got, []string{"user:please t1", "assistant:did t1"}) {
		t.Errorf("history after revert: %v", got)
	}
	if e, err := bus.Threads().Get(ctx, "G"); err != nil || string(e.Value()) != res.Rollout {
		t.Errorf("THREADS G: %v %v", e, err)
	}
	// Nobody can append to the sealed rollout.
	lease, err := bus.TakeLease(ctx, "G", stream.LeaseOptions{Holder: "late"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if _, err := bus.OpenWriter(ctx, lease, "rG1", stream.WriterOptions{}); !errors.Is(err, stream.ErrSealed) {
		t.Errorf("writer on a sealed rollout: %v, want ErrSealed", err)
	}
	// A revert of a revert: its base may be the first rollout itself.
	w, err := bus.OpenWriter(ctx, lease, res.Rollout, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := rollout.Builder{Next: w.Next()}
	for _, r := range []rollout.Record{b.TaskStarted("t4"), b.UserMessage("x"), b.Message("assistant", "did t4"), b.TaskComplete("t4")} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lease.Release(ctx)
	res2, err := Revert(ctx, bus.Bus, "G", "t4")
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(res2.State); !equal(got, []string{"user:please t1", "assistant:did t1"}) {
		t.Errorf("history after a second revert: %v", got)
	}
}

// TestConcurrentRevertsAndAppends: reverts race each other and a live
// appender, round after round until a revert has won at least once. In every
// round at most one revert wins; every acknowledged record stays in the old
// rollout (a sealed predecessor of the thread's current view); nothing is
// acknowledged after the seal, and the appender that lost is fenced.
func TestConcurrentRevertsAndAppends(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	won := 0
	for round := 0; round < 12 && won < 4; round++ {
		thread, rid := "G"+strconv.Itoa(round), "rG"+strconv.Itoa(round)
		a := newAgent(t, bus.Bus, thread, rid, rollout.HistoryPaginated).turn("t1", true).turn("t2", true).flush()
		var acked atomic.Int64
		var paused atomic.Bool
		// Odd rounds: the appender stays live (lease held, writer open) but
		// pauses while the reverts commit, so one must win and the appender,
		// resuming, must be fenced. Even rounds race freely.
		paused.Store(round%2 == 1)
		done := make(chan struct{})
		go func() { // the live appender, paced
			defer close(done)
			for {
				for paused.Load() {
					time.Sleep(time.Millisecond)
				}
				ord, err := a.w.Append(ctx, a.b.Message("assistant", "more"))
				if err != nil || a.w.Flush(ctx) != nil {
					return
				}
				acked.Store(ord)
				time.Sleep(time.Duration(round%4) * time.Millisecond)
			}
		}()
		var wins, moved atomic.Int32
		var rg sync.WaitGroup
		for i := 0; i < 3; i++ {
			rg.Add(1)
			go func(b *stream.Bus) {
				defer rg.Done()
				p, err := PlanRevert(ctx, b, thread, "t2")
				if errors.Is(err, ErrBadPosition) {
					moved.Add(1) // planned after another revert won: t2 is gone
					return
				}
				if err != nil {
					t.Errorf("plan: %v", err)
					return
				}
				_, err = p.Commit(ctx, b)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, stream.ErrMoved):
					moved.Add(1)
				default:
					t.Errorf("commit: %v", err)
				}
			}(bus.Connect(t))
		}
		rg.Wait()
		paused.Store(false)
		if wins.Load() == 0 {
			a.w.Close(ctx) //nolint:errcheck // stopping the appender
		}
		<-done
		if wins.Load() > 1 {
			t.Fatalf("round %d: %d reverts won", round, wins.Load())
		}
		entries, err := bus.ReadAll(ctx, rid, 1)
		if err != nil {
			t.Fatal(err)
		}
		last := entries[len(entries)-1]
		sealed := last.Record.Type == rollout.TypeEventMsg && last.Record.EventKind() == rollout.EventRolloutSealed
		if (wins.Load() == 1) != sealed {
			t.Fatalf("round %d: %d won, sealed %v", round, wins.Load(), sealed)
		}
		if n := acked.Load(); n > last.Ordinal || (sealed && n >= last.Ordinal) {
			t.Fatalf("round %d: ordinal %d acknowledged, the old rollout ends at %d (sealed %v)", round, n, last.Ordinal, sealed)
		}
		if sealed {
			won++
			if !errors.Is(a.w.Err(), stream.ErrFenced) {
				t.Errorf("round %d: the appender was not fenced: %v", round, a.w.Err())
			}
			src, err := Load(ctx, bus.Bus, thread)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := src.Corpus.Rollouts[rid]; !ok {
				t.Errorf("round %d: the sealed rollout is not reachable from the current view", round)
			}
		}
		a.lease.Release(ctx) //nolint:errcheck
	}
	if won == 0 {
		t.Fatal("no revert ever won against the appender: the race was not exercised")
	}
}

// TestRollForward: a revert that died between its seal and its pointer
// switch is finished at start-up.
func TestRollForward(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	newAgent(t, bus.Bus, "G", "rG1", rollout.HistoryPaginated).turn("t1", true).turn("t2", true).stop()
	p, err := PlanRevert(ctx, bus.Bus, "G", "t2")
	if err != nil {
		t.Fatal(err)
	}
	disarm := faults.Arm("revert.after-seal", 1, func(string) { panic("crash") })
	func() {
		defer func() { recover() }()
		p.Commit(ctx, bus.Bus) //nolint:errcheck // it dies at the crash point
	}()
	disarm()
	if e, _ := bus.Threads().Get(ctx, "G"); string(e.Value()) != "rG1" {
		t.Fatalf("the pointer moved before the crash point: %s", e.Value())
	}
	moved, err := RollForward(ctx, bus.Bus)
	if err != nil || !equal(moved, []string{"G"}) {
		t.Fatalf("roll forward: %v %v", moved, err)
	}
	if e, _ := bus.Threads().Get(ctx, "G"); string(e.Value()) != p.Next {
		t.Errorf("THREADS G = %s, want %s", e.Value(), p.Next)
	}
}

// TestGC: a sealed rollout the new one references stays; an abandoned
// revert's rollout goes; a dry run removes nothing.
func TestGC(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	newAgent(t, bus.Bus, "G", "rG1", rollout.HistoryPaginated).turn("t1", true).turn("t2", true).stop()
	p1, _ := PlanRevert(ctx, bus.Bus, "G", "t2")
	p2, _ := PlanRevert(ctx, bus.Bus, "G", "t2")
	if _, err := p1.Commit(ctx, bus.Bus); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Commit(ctx, bus.Bus); !errors.Is(err, stream.ErrMoved) {
		t.Fatalf("the second revert: %v", err)
	}
	dry, err := GC(ctx, bus.Bus, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Removed) != 1 || dry.Removed[0].ID != p2.Next || len(dry.Kept) != 1 || dry.Kept[0].ID != "rG1" {
		t.Fatalf("dry run: %+v", dry)
	}
	if tail, _ := bus.Tail(ctx, p2.Next); tail.Seq == 0 {
		t.Fatal("the dry run removed a rollout")
	}
	if _, err := GC(ctx, bus.Bus, "", false); err != nil {
		t.Fatal(err)
	}
	if tail, _ := bus.Tail(ctx, p2.Next); tail.Seq != 0 {
		t.Error("gc left the abandoned rollout on the bus")
	}
	src, err := Load(ctx, bus.Bus, "G")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := replay.Fast(src.View, replay.Options{}); err != nil || len(texts(st)) != 2 {
		t.Errorf("the thread after gc: %v %v", err, st)
	}
	_ = context.Background
}

// A truncated .jsonl.zst in the mirror makes gc fail at once, naming the file
// (it used to spin for ever on the cursor's error).
func TestGCTruncatedZst(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	var b rollout.Builder
	var plain bytes.Buffer
	for _, r := range []rollout.Record{b.Meta(rollout.SessionMeta{ID: "Z", RolloutID: "rZ", Source: rollout.Source{Kind: "sim"}}), b.TaskStarted("t1"), b.Message("user", strings.Repeat("x", 4000))} {
		plain.Write(r.Encode())
	}
	var z bytes.Buffer
	if err := rollout.WriteZst(&z, &plain); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rZ.jsonl"+rollout.ZstExt)
	if err := os.WriteFile(path, z.Bytes()[:z.Len()/2], 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := GC(ctx, bus.Bus, dir, true); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("gc on a truncated .zst: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("gc on a truncated .zst never returned")
	}
}

// Junk packs on the bus are skipped and counted by gc --dry-run, and a
// rollout gc cannot read is kept.
func TestGCJunkOnBus(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	newAgent(t, bus.Bus, "J", "rJ1", rollout.HistoryPaginated).turn("t1", true).stop()
	for _, subj := range []string{stream.RolloutSubject("rJ1"), stream.RolloutSubject("rjunk")} {
		if _, err := bus.JetStream().Publish(ctx, subj, []byte("junk")); err != nil {
			t.Fatal(err)
		}
	}
	res, err := GC(ctx, bus.Bus, "", true)
	if err != nil {
		t.Fatalf("gc --dry-run with junk on the bus: %v", err)
	}
	if res.SkippedPacks != 2 || len(res.Removed) != 0 || len(res.Kept) != 2 {
		t.Fatalf("gc --dry-run: %+v", res)
	}
}

// Two chained reverts: the middle rollout is sealed and may be referenced by
// nothing, but the first one's seal names it; gc keeps the whole chain and the
// tree stays clean.
func TestGCChainedReverts(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	newAgent(t, bus.Bus, "C", "rC1", rollout.HistoryPaginated).turn("t1", true).turn("t2", true).turn("t3", true).stop()
	r1, err := Revert(ctx, bus.Bus, "C", "t3")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Revert(ctx, bus.Bus, "C", "t2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := GC(ctx, bus.Bus, "", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Removed {
		t.Errorf("gc removed %s (%s); chain %s -> %s", r.ID, r.Reason, r1.Sealed, r2.Sealed)
	}
	for _, id := range []string{r1.Sealed, r2.Sealed} {
		if tail, _ := bus.Tail(ctx, id); tail.Seq == 0 {
			t.Errorf("rollout %s is gone from the bus", id)
		}
	}
	src, err := Load(ctx, bus.Bus, "C")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := replay.Fast(src.View, replay.Options{}); err != nil || len(texts(st)) != 2 {
		t.Errorf("the thread after gc: %v %v", err, texts(st))
	}
}
