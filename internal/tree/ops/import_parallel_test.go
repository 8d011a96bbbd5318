package ops

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree/treegen"
)

// busContent is every rollout on the bus (its lines, by rollout id) and
// every THREADS entry, after an import of dir's files.
func busContent(t *testing.T, bus *stream.Bus, res []Imported) (map[string]string, map[string]string) {
	t.Helper()
	ctx := ctxT(t)
	rollouts, threads := map[string]string{}, map[string]string{}
	for _, im := range res {
		if im.Rollout == "" {
			continue
		}
		mem, err := ReadRollout(ctx, bus, im.Rollout)
		if err != nil {
			t.Fatal(err)
		}
		rollouts[im.Rollout] = string(mem.Bytes())
		e, err := bus.Threads().Get(ctx, im.Thread)
		if err != nil {
			t.Fatalf("THREADS %s: %v", im.Thread, err)
		}
		threads[im.Thread] = string(e.Value())
	}
	return rollouts, threads
}

// revertChain writes two rollouts of one thread R (r-R1 sealed in favour of
// r-R2) and a third of thread R named so it sorts between them.
func revertChain(t *testing.T, dir string) {
	t.Helper()
	var b1, b2, b3 rollout.Builder
	one := rollout.MemOf("r-R1", []rollout.Record{b1.Meta(rollout.SessionMeta{ID: "R", RolloutID: "r-R1", Cwd: "/"}), b1.TaskStarted("a"),
		b1.UserMessage("first"), b1.Event(rollout.RolloutSealed{Type: rollout.EventRolloutSealed, SuccessorRolloutID: "r-R2"})})
	two := rollout.MemOf("r-R2", []rollout.Record{b2.Meta(rollout.SessionMeta{ID: "R", RolloutID: "r-R2", Cwd: "/"}), b2.TaskStarted("b"), b2.UserMessage("second")})
	mid := rollout.MemOf("r-R15", []rollout.Record{b3.Meta(rollout.SessionMeta{ID: "R", RolloutID: "r-R15", Cwd: "/"}), b3.TaskStarted("c")})
	for name, m := range map[string]*rollout.Mem{"a-r-R1.jsonl": one, "c-r-R2.jsonl": two, "b-r-R15.jsonl": mid} {
		if err := os.WriteFile(filepath.Join(dir, name), m.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestParallelImportPublishesWhatOneAtATimeDoes: a generated tree, a thread
// with three rollouts and a file that fails, imported 16 at a time, leave
// the bus holding exactly what an import one file at a time leaves (every
// rollout's bytes, every THREADS entry: the first of a thread's files in
// path order), with the results in path order; the thread's files never
// contend for its lease.
func TestParallelImportPublishesWhatOneAtATimeDoes(t *testing.T) {
	dir := t.TempDir()
	if _, err := treegen.Write(filepath.Join(dir, "tree"), treegen.Config{Seed: 2, Fanout: 4, Depth: 2, Turns: 2, Unreceived: 0.2}); err != nil {
		t.Fatal(err)
	}
	revertChain(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "broken.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var want [][]Imported
	var wantRollouts, wantThreads []map[string]string
	for _, parallel := range []int{1, 16} {
		bus := newBus(t)
		res, err := ImportWith(ctxT(t), bus.Bus, dir, ImportOptions{Holder: "import-test", Parallel: parallel})
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, im := range res {
			if im.Err != "" {
				failed++
				if filepath.Base(im.Path) != "broken.jsonl" {
					t.Errorf("parallel %d: %s failed: %s", parallel, im.Path, im.Err)
				}
			}
		}
		if failed != 1 || len(res) != 21+3+1 {
			t.Fatalf("parallel %d: %d results, %d failed", parallel, len(res), failed)
		}
		paths := make([]string, len(res))
		for i, im := range res {
			paths[i] = im.Path
		}
		if !slices.IsSorted(paths) {
			t.Fatalf("parallel %d: results not in path order: %v", parallel, paths)
		}
		r, th := busContent(t, bus.Bus, res)
		if th["R"] != "r-R1" {
			t.Errorf("parallel %d: THREADS R is %q, want r-R1 (its first file in path order)", parallel, th["R"])
		}
		want, wantRollouts, wantThreads = append(want, res), append(wantRollouts, r), append(wantThreads, th)
	}
	if fmt.Sprint(want[0]) != fmt.Sprint(want[1]) {
		t.Errorf("results differ:\n one at a time %v\n 16 at a time  %v", want[0], want[1])
	}
	for id, lines := range wantRollouts[0] {
		if wantRollouts[1][id] != lines {
			t.Errorf("rollout %s differs between the imports", id)
		}
	}
	if fmt.Sprint(wantThreads[0]) != fmt.Sprint(wantThreads[1]) || len(wantRollouts[0]) != len(wantRollouts[1]) {
		t.Errorf("THREADS differ: %v vs %v", wantThreads[0], wantThreads[1])
	}
}

// TestImportPacksARolloutIntoOneMessage: a rollout of 500 records goes onto
// the bus as one message (a pack), not one for the first records and more
// for the rest.
func TestImportPacksARolloutIntoOneMessage(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	var b rollout.Builder
	recs := []rollout.Record{b.Meta(rollout.SessionMeta{ID: "P1", Cwd: "/"})}
	for i := range 499 {
		recs = append(recs, b.Message("user", fmt.Sprintf("message %d", i)))
	}
	if err := os.WriteFile(filepath.Join(dir, "p1.jsonl"), rollout.MemOf("p1", recs).Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Import(ctx, bus.Bus, dir, "import-test", nil)
	if err != nil || len(res) != 1 || res[0].Published != 500 {
		t.Fatal(res, err)
	}
	entries, err := bus.ReadAll(ctx, "P1", 1)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[uint64]bool{}
	for _, e := range entries {
		seqs[e.Seq] = true
	}
	if len(entries) != 500 || len(seqs) != 1 {
		t.Fatalf("%d records in %d messages, want 500 in 1", len(entries), len(seqs))
	}
}

// TestImportNamesTheRecordAtFault: a record the writer refuses (an invalid
// id in an inter_agent_sent) fails its file naming the record; the records
// before it are published, as when records were appended one at a time.
func TestImportNamesTheRecordAtFault(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	var b rollout.Builder
	recs := []rollout.Record{b.Meta(rollout.SessionMeta{ID: "F1", Cwd: "/"}), b.TaskStarted("a"), b.UserMessage("hi"), b.Message("user", "hi"),
		b.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: "m1", IdempotencyKey: "k", ToThread: "no.such", Kind: rollout.MsgTask}),
		b.TaskComplete("a")}
	if err := os.WriteFile(filepath.Join(dir, "f1.jsonl"), rollout.MemOf("f1", recs).Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Import(ctx, bus.Bus, dir, "import-test", nil)
	if err != nil || len(res) != 1 {
		t.Fatal(res, err)
	}
	if im := res[0]; !strings.Contains(im.Err, "f1.jsonl record 5") || im.Published != 4 {
		t.Fatalf("import of a file with a bad record 5: %+v", im)
	}
	entries, err := bus.ReadAll(ctx, "F1", 1)
	if err != nil || len(entries) != 4 {
		t.Fatalf("%d records on the bus (%v), want the 4 before the bad one", len(entries), err)
	}
}

// TestParallelImportStopsWhenTheBusIsGone: with the bus unavailable (its
// connection closed), the import stops at the first file that finds out,
// with stream.ErrBusUnavailable, instead of trying every file: no more files
// are attempted than were in flight.
func TestParallelImportStopsWhenTheBusIsGone(t *testing.T) {
	b := newBus(t)
	dir := t.TempDir()
	if _, err := treegen.Write(dir, treegen.Config{Seed: 3, Fanout: 5, Depth: 3, Turns: 1}); err != nil { // 156 files
		t.Fatal(err)
	}
	nc, err := nats.Connect(b.Server.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	bus, err := stream.Open(ctxT(t), nc, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	res, err := ImportWith(ctxT(t), bus, dir, ImportOptions{Holder: "import-test", Parallel: 8})
	if !errors.Is(err, stream.ErrBusUnavailable) || !strings.Contains(err.Error(), "stopped at") {
		t.Fatalf("import with the bus gone: %v", err)
	}
	if len(res) == 0 || len(res) > 8 {
		t.Fatalf("%d files attempted with the bus gone, want 1 to 8 (those in flight)", len(res))
	}
}
