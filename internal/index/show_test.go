package index

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
)

func compress(t testing.TB, dir, id string) {
	t.Helper()
	plain := datadir.MirrorPath(dir, id)
	var buf bytes.Buffer
	if err := rollout.WriteZst(&buf, bytes.NewReader(mustRead(t, plain))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain+rollout.ZstExt, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(plain); err != nil {
		t.Fatal(err)
	}
}

// sameState compares two states, the replay statistics aside.
func sameState(t testing.TB, a, b *replay.State) {
	t.Helper()
	x, y := *a, *b
	x.Replay, y.Replay = replay.Stats{}, replay.Stats{}
	ja, _ := x.MarshalIndent()
	jb, _ := y.MarshalIndent()
	if !bytes.Equal(ja, jb) {
		t.Errorf("states differ:\n%s\n%s", ja, jb)
	}
}

// TestShow: the thread's current rollout, compressed or not, replayed fast;
// the same state as the naive fold; no staleness on a fresh index.
func TestShow(t *testing.T) {
	ctx := context.Background()
	dir := fullDataDir(t, 3, 2, short(400, 200))
	compress(t, dir, "rollout-2")
	// A long thread that compacts often (with open_calls): its fast replay
	// reads only the tail past the newest checkpoint, from a .zst by seeking.
	writeRollout(t, dir, "rollout-91", gen.All(gen.Config{Seed: 91, Records: 3000, CompactEvery: 200}))
	compress(t, dir, "rollout-91")
	compress(t, dir, "019c8a59-e9dd-71f0-9ae3-4079fe9726a9") // the Codex session with a compaction
	rebuild(t, dir)
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, id := range []string{"thread-91", "thread-2", "019c8a59-e9dd-71f0-9ae3-4079fe9726a9", "thread-A2", "thread-M", "t-rev", "thread-1002"} {
		s, err := Show(ctx, r, dir, id, replay.Options{})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if len(s.Stale) > 0 {
			t.Errorf("%s: stale on a fresh index: %v", id, s.Stale)
		}
		f, _ := rollout.OpenFile(s.Path)
		naive, err := replay.Naive(f, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, s.State, naive)
		if id == "thread-91" && (!strings.HasSuffix(s.Path, ".zst") || s.State.Replay.RecordsRead*4 >= naive.Replay.RecordsRead) {
			t.Errorf("thread-91: %s, %d records read (naive %d): not the tail past the checkpoint", s.Path, s.State.Replay.RecordsRead, naive.Replay.RecordsRead)
		}
		if id == "t-rev" && s.Rollout.ID != "r-rev-2" {
			t.Errorf("t-rev shows rollout %s", s.Rollout.ID)
		}
	}
}

// TestShowStale: an index that lags, or whose checkpoint locator or turns
// are wrong, is reported stale; show still answers from the mirror.
func TestShowStale(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeMirrorFile(t, dir, "rollout-M", mustRead(t, examplesDir+"/mid-turn-compaction.jsonl"))
	ix := openDir(t, dir)
	catchUp(t, ix)
	show := func() []string {
		t.Helper()
		r, err := OpenReader(ctx, datadir.IndexPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		s, err := Show(ctx, r, dir, "thread-M", replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Stale
	}
	if st := show(); len(st) != 0 {
		t.Fatalf("fresh index stale: %v", st)
	}
	ix.db.ExecContext(ctx, "UPDATE rollouts SET checkpoint_offset = checkpoint_offset + 1 WHERE rollout_id = 'rollout-M'")
	// Both checks see it: the locator names no checkpoint, and not the one
	// replay started from.
	if st := show(); len(st) != 2 || !strings.Contains(st[0], "checkpoint locator") || !strings.Contains(st[1], "replay started from") {
		t.Errorf("wrong locator: %v", st)
	}
	ix.db.ExecContext(ctx, "UPDATE rollouts SET checkpoint_offset = checkpoint_offset - 1 WHERE rollout_id = 'rollout-M'")
	ix.db.ExecContext(ctx, "UPDATE turns SET status = 'completed' WHERE rollout_id = 'rollout-M' AND seq = 2")
	if st := show(); len(st) != 1 || !strings.Contains(st[0], "is completed") {
		t.Errorf("wrong turn: %v", st)
	}
	// The mirror grows; the index has not caught up.
	es := entriesOf(t, datadir.MirrorPath(dir, "rollout-M"))
	b := rollout.Builder{Next: es[len(es)-1].Ordinal + 1}
	f, _ := os.OpenFile(datadir.MirrorPath(dir, "rollout-M"), os.O_APPEND|os.O_WRONLY, 0)
	rec := b.TaskComplete("deploy")
	f.Write(append(rec.Append(nil), '\n'))
	f.Close()
	if st := show(); len(st) != 1 || !strings.Contains(st[0], "lags") {
		t.Errorf("lagging index: %v", st)
	}
}

// TestReadWhileWriting: a reader lists and shows threads while a writer
// indexes the same file in small transactions; the reader never fails and
// never sees a thread go back.
func TestReadWhileWriting(t *testing.T) {
	ctx := context.Background()
	dir := genDataDir(t, short(8, 3), 2, short(300, 150))
	ix := openDir(t, dir)
	ix.batch = short(5, 25)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		if _, err := ix.CatchUp(ctx, nil); err != nil {
			t.Error(err)
		}
	}()
	reads := 0
	deadline := time.Now().Add(time.Minute)
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not finish")
		}
		r, err := OpenReader(ctx, datadir.IndexPath(dir))
		if err != nil {
			t.Fatalf("open while writing: %v", err)
		}
		p, err := r.Threads(ctx, ThreadQuery{Limit: 50, Search: "request"})
		if err != nil {
			t.Fatalf("threads while writing: %v", err)
		}
		for _, th := range p.Threads {
			if _, err := Show(ctx, r, dir, th.ID, replay.Options{}); err != nil {
				t.Fatalf("show %s while writing: %v", th.ID, err)
			}
		}
		r.Close()
		reads++
	}
	wg.Wait()
	t.Logf("%d reads while writing", reads)
}

// TestShowReadsTheView: a reverted thread (a rollout whose history_base is
// the frozen prefix of its predecessor) is shown as its view: the turns and
// history of the prefix, then its own.
func TestShowReadsTheView(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	now := clock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	b1 := rollout.Builder{Now: now}
	base := []rollout.Record{
		b1.Meta(rollout.SessionMeta{ID: "t-view", RolloutID: "r-view-1", Source: rollout.Source{Kind: "cli"}, Cwd: "/repo", HistoryMode: rollout.HistoryPaginated}),
		b1.TaskStarted("keep"),
		b1.UserMessage("keep this turn"),
		b1.TurnContext(rollout.TurnContext{TurnID: "keep", Model: "model-large", ApprovalPolicy: "never"}),
		b1.Message("user", "keep this turn"),
		b1.TaskComplete("keep"),
	}
	cut := int64(len(rollout.MemOf("r-view-1", base).Bytes()))
	base = append(base, b1.TaskStarted("drop"), b1.UserMessage("drop this turn"), b1.TaskComplete("drop"),
		b1.Event(rollout.RolloutSealed{Type: rollout.EventRolloutSealed, SuccessorRolloutID: "r-view-2"}))
	writeRollout(t, dir, "r-view-1", base)
	b2 := rollout.Builder{Now: now}
	writeRollout(t, dir, "r-view-2", []rollout.Record{
		b2.Meta(rollout.SessionMeta{ID: "t-view", RolloutID: "r-view-2", Source: rollout.Source{Kind: "cli"}, Cwd: "/repo", HistoryMode: rollout.HistoryPaginated,
			HistoryBase: &rollout.HistoryPosition{RolloutID: "r-view-1", EndOrdinalExclusive: 7, EndByteOffset: cut}}),
		b2.TaskStarted("next"),
		b2.UserMessage("the next turn"),
	})
	rebuild(t, dir)
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := Show(ctx, r, dir, "t-view", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var turns []string
	for _, tu := range s.State.Turns {
		turns = append(turns, tu.TurnID+" "+tu.Status)
	}
	if s.Rollout.ID != "r-view-2" || strings.Join(turns, ", ") != "keep completed, next interrupted" ||
		s.State.Model != "model-large" || len(s.State.History) != 1 {
		t.Fatalf("shown rollout %s, turns %v, model %q, history %d items", s.Rollout.ID, turns, s.State.Model, len(s.State.History))
	}
}
