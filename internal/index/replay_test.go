package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestTurnsAgreeWithNaive indexes generated logs (version 1 and 0, with
// rollbacks crossing compactions, markers larger than the turns, records
// between turns) in random batches and checks, against replay.Naive, every
// turn replay lists (id, status, reason, user flag), the settings in effect,
// and the window the index's checkpoint implies.
func TestTurnsAgreeWithNaive(t *testing.T) {
	logs := short(300, 30)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := OpenFile(ctx, filepath.Join(dir, "x.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var rolledBack, checkpoints int
	for i := range logs {
		cfg := gen.Config{Seed: int64(seed%1e6) + int64(i), Records: 50 + rng.IntN(400)}
		switch i % 3 {
		case 1:
			cfg.V0 = true
		case 2:
			cfg.V0, cfg.V0TaskStarted = true, true
		}
		recs := gen.All(cfg)
		id := fmt.Sprintf("r%d", i)
		for j := range recs {
			if recs[j].Type == rollout.TypeSessionMeta && j == 0 {
				m, _ := rollout.Decode[rollout.SessionMeta](&recs[j])
				m.RolloutID, m.ID = id, fmt.Sprintf("t%d", i)
				if cfg.V0 {
					m.RolloutID = ""
					id = m.ID
				}
				b := rollout.Builder{Next: recs[j].Ordinal}
				recs[j] = b.JSON(rollout.TypeSessionMeta, m)
				recs[j].Timestamp = recs[1].Timestamp
				if cfg.V0 {
					recs[j].Ordinal, recs[j].CRC = 0, ""
				}
			}
		}
		mem := rollout.MemOf(id, recs)
		st, err := replay.Naive(mem, replay.Options{Salvage: true})
		if err != nil {
			t.Fatalf("%s (gen seed %d): naive: %v", id, cfg.Seed, err)
		}
		es := memEntries(t, mem)
		for len(es) > 0 {
			n := min(1+rng.IntN(60), len(es))
			if err := ix.Apply(ctx, id, es[:n]); err != nil {
				t.Fatalf("%s: apply: %v", id, err)
			}
			es = es[n:]
		}
		ro, _, err := ix.Rollout(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		turns, err := ix.Turns(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if msg := compareWindow(windowOf(turns, ro.CheckpointOrdinal), st.Turns); msg != "" {
			t.Fatalf("%s (gen seed %d, v0 %v): %s", id, cfg.Seed, cfg.V0, msg)
		}
		var model, cwd string
		if err := ix.db.QueryRowContext(ctx, "SELECT model, cwd FROM rollouts WHERE rollout_id = ?", id).Scan(&model, &cwd); err != nil {
			t.Fatal(err)
		}
		if model != st.Model || cwd != st.Cwd {
			t.Fatalf("%s: model %q cwd %q, replay has %q %q", id, model, cwd, st.Model, st.Cwd)
		}
		for _, tn := range turns {
			if tn.RolledBack {
				rolledBack++
			}
		}
		if ro.CheckpointOrdinal > 0 {
			checkpoints++
		}
	}
	t.Logf("coverage: %d rolled-back turns, %d rollouts with a checkpoint in effect", rolledBack, checkpoints)
	if rolledBack == 0 || checkpoints == 0 {
		t.Error("the generated logs did not cover rollbacks and checkpoints")
	}
}

// TestRealRolloutsAgreeWithReplay: the Codex sessions and the examples
// (the chapter's rollbacks of 1, 2 and 3 turns included).
func TestRealRolloutsAgreeWithReplay(t *testing.T) {
	ctx := context.Background()
	paths, _ := filepath.Glob(codexGlob)
	ex, _ := filepath.Glob(filepath.Join(examplesDir, "*.jsonl"))
	for _, p := range append(paths, ex...) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			dir := t.TempDir()
			f, err := rollout.OpenFile(p)
			if err != nil {
				t.Fatal(err)
			}
			st, err := replay.Naive(f, replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			writeMirrorFile(t, dir, st.RolloutID, mustRead(t, p))
			ix := openDir(t, dir)
			catchUp(t, ix)
			ro, _, _ := ix.Rollout(ctx, st.RolloutID)
			turns, _ := ix.Turns(ctx, st.RolloutID)
			if msg := compareWindow(windowOf(turns, ro.CheckpointOrdinal), st.Turns); msg != "" {
				t.Fatal(msg)
			}
			th, err := ix.Thread(ctx, st.ThreadID)
			if err != nil {
				t.Fatal(err)
			}
			if th.Model != st.Model || th.Cwd != st.Cwd || th.Title == "" {
				t.Errorf("thread %+v; replay model %q cwd %q", th, st.Model, st.Cwd)
			}
			if n := len(st.Turns); n > 0 && th.Status != st.Turns[n-1].Status {
				t.Errorf("thread status %q, the last turn's is %q", th.Status, st.Turns[n-1].Status)
			}
		})
	}
}

func memEntries(t testing.TB, m *rollout.Mem) []rollout.Entry {
	t.Helper()
	cur, err := m.Forward(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []rollout.Entry
	for {
		e, err := cur.Next()
		if err != nil {
			return out
		}
		out = append(out, e)
	}
}
