package simcrash

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
)

func testEnv(t *testing.T) *Env {
	t.Helper()
	e, err := NewEnv(context.Background(), EnvOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestCleanRunsHoldEveryInvariant: every tree, run without a crash, ends
// as its plan says (effects once, deliveries, tree, replay, mirror and
// index equal to the bus), and reaches each of its points at least once.
func TestCleanRunsHoldEveryInvariant(t *testing.T) {
	e := testEnv(t)
	ctx := testCtx(t)
	for _, seed := range []uint64{1, 2} {
		for i, tree := range Trees {
			res := Run(ctx, e, Scenario{Tree: tree, Seed: seed}, fmt.Sprintf("c%d%d", seed, i))
			if res.Failed() {
				t.Errorf("%s: %v", res.ID(), res.Problems)
			}
			if res.Effects != len(mustPlan(t, tree, seed).Keys()) || res.Acked == 0 || res.Records == 0 {
				t.Errorf("%s: %d effects, %d acked packs, %d records", res.ID(), res.Effects, res.Acked, res.Records)
			}
			for _, p := range []string{PointBeforeEffect, PointAfterEffect, PointSentBeforePublish, PointTakenBeforeReceipt,
				PointReceiptBeforeAck, PointBetweenBarriers, PointSpawnedBeforeChild, PointCreatedBeforeRecorded, PointAfterSpawn} {
				if res.Counts[p] == 0 {
					t.Errorf("%s: point %s never reached", res.ID(), p)
				}
			}
			if (res.Counts[PointRevertAfterSeal] == 1) != (tree == TreeRevert) {
				t.Errorf("%s: revert_after_seal reached %d times", res.ID(), res.Counts[PointRevertAfterSeal])
			}
		}
	}
}

func mustPlan(t *testing.T, tree string, seed uint64) *Plan {
	t.Helper()
	p, err := NewPlan(tree, seed, "x")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCrashesRecover: one scenario per point on each tree recovers with
// every invariant held, and the crash happened where it was asked to.
func TestCrashesRecover(t *testing.T) {
	e := testEnv(t)
	ctx := testCtx(t)
	n := 0
	for _, tree := range Trees {
		for _, p := range Points {
			if mirrorPoint(p) || (p == PointRevertAfterSeal) != (tree == TreeRevert) {
				continue
			}
			sc := Scenario{Tree: tree, Seed: 3, Point: p, At: 1}
			res := Run(ctx, e, sc, fmt.Sprintf("r%d", n))
			n++
			if !res.Reached || res.Processes < 2 || res.Failed() {
				t.Errorf("%s: reached %v, %d processes, %v", sc.ID(), res.Reached, res.Processes, res.Problems)
			}
		}
	}
}

// TestMirrorCrashRecovers: the mirror killed before an append and half way
// through one comes back and ends equal to the bus, with the index.
func TestMirrorCrashRecovers(t *testing.T) {
	ctx := testCtx(t)
	for _, p := range []string{PointMirrorAfterAck, PointMirrorTornWrite} {
		sc := Scenario{Tree: TreeSpawn, Seed: 1, Point: p, At: 7}
		res := RunOwn(ctx, t.TempDir(), sc, "m"+p[7:9])
		if !res.Reached || res.Failed() {
			t.Errorf("%s: reached %v, %v", sc.ID(), res.Reached, res.Problems)
		}
	}
}

// TestCreatedBeforeRecordedRecovers: a process that dies after a new
// thread's session_meta is flushed and before its THREADS entry is written
// (the enumeration found it leaving an orphan rollout and a duplicate_thread
// once): the retried create finishes the rollout it left, on every tree
// (a spawn, StartRoot, a fork) and at every position.
func TestCreatedBeforeRecordedRecovers(t *testing.T) {
	e := testEnv(t)
	ctx := testCtx(t)
	for i, tree := range Trees {
		for at := 1; ; at++ {
			sc := Scenario{Tree: tree, Seed: 1, Point: PointCreatedBeforeRecorded, At: at}
			res := Run(ctx, e, sc, fmt.Sprintf("cbr%d-%d", i, at))
			if !res.Reached {
				if at == 1 {
					t.Errorf("%s: never reached", sc.ID())
				}
				break
			}
			if res.Failed() {
				t.Errorf("%s: %v", sc.ID(), res.Problems)
			}
		}
	}
}

// TestChecksCatchMutants: the checks fail when the system does wrong. A
// probe that says "not executed" of an executed call makes the agent
// retry it: the world's ledger shows the effect twice and the reconciled
// outcome contradicts the world. A mirror file changed behind the
// mirror's back differs from the bus.
func TestChecksCatchMutants(t *testing.T) {
	e := testEnv(t)
	ctx := testCtx(t)
	undo := LieInProbes()
	res := Run(ctx, e, Scenario{Tree: TreeSpawn, Seed: 1, Point: PointAfterEffect, At: 3}, "lie")
	undo()
	all := strings.Join(res.Problems, "\n")
	if !strings.Contains(all, "carried out 2 times") || !strings.Contains(all, "was reconciled as not_executed") {
		t.Errorf("a lying probe went unnoticed: %v", res.Problems)
	}
	beforeCheck = func(r *run) {
		for _, s := range r.subjects {
			id, ok := strings.CutPrefix(s, "rollout.")
			if !ok {
				continue
			}
			path := datadir.PlainPath(r.env.Dir, id)
			deadline := time.Now().Add(10 * time.Second)
			for {
				data, err := os.ReadFile(path)
				if err == nil && len(data) > 40 {
					data[30] ^= 1
					os.WriteFile(path, data, 0o600)
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("no mirror file %s to damage", path)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	res = Run(ctx, e, Scenario{Tree: TreeFork, Seed: 1}, "flip")
	beforeCheck = nil
	if !strings.Contains(strings.Join(res.Problems, "\n"), "differs between the mirror and the bus") {
		t.Errorf("a damaged mirror file went unnoticed: %v", res.Problems)
	}
}

func TestParseID(t *testing.T) {
	for _, sc := range []Scenario{{Tree: "tree", Seed: 7}, {Tree: "fork", Seed: 1, Point: PointAfterEffect, At: 3}, {Tree: "resend", Seed: 99, Point: PointMirrorTornWrite, At: 12}} {
		got, err := ParseID(sc.ID())
		if err != nil || got != sc {
			t.Errorf("ParseID(%q) = %+v, %v", sc.ID(), got, err)
		}
	}
	for _, bad := range []string{"", "tree", "tree/x/clean", "nope/1/clean", "tree/1/nope/1", "tree/1/after_effect/0", "tree/1/dirty"} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
}
