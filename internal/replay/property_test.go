package replay

import (
	"errors"
	"flag"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
)

var (
	propLogs = flag.Int("prop.logs", 0, "generated logs in the fast-vs-naive property test (default 10000, 1000 with -short)")
	propSeed = flag.Int64("prop.seed", 1, "first seed of the property test (a failure prints the seed to rerun with -prop.seed=S -prop.logs=1)")
)

// configFor derives a log's shape from its seed, so one number reproduces it.
func configFor(seed int64) gen.Config {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	cfg := gen.Config{Seed: seed, Records: 5 + r.IntN(150)}
	switch r.IntN(10) {
	case 0:
		cfg.V0 = true
	case 1:
		cfg.V0, cfg.V0TaskStarted = true, true
	}
	if r.IntN(8) == 0 {
		cfg.Records += 400
	}
	return cfg
}

// coverage counts the hard cases of DESIGN §4 rule 7 among generated logs.
type coverage struct {
	rollbackAcrossCompaction int
	checkpointRolledBack     int
	midTurnCompaction        int
	recordsBetweenTurns      int
	rollbackExceedsTurns     int
	versionZero              int
	patchWithoutBaseline     int
	legacyCompaction         int
	danglingCarried          int
}

func (c *coverage) each() []struct {
	name string
	n    int
} {
	return []struct {
		name string
		n    int
	}{
		{"rollback across compaction", c.rollbackAcrossCompaction},
		{"checkpoint inside a rolled-back turn", c.checkpointRolledBack},
		{"mid-turn compaction", c.midTurnCompaction},
		{"records between turns", c.recordsBetweenTurns},
		{"N larger than the turns", c.rollbackExceedsTurns},
		{"version-0 logs", c.versionZero},
		{"patches without baseline", c.patchWithoutBaseline},
		{"legacy compactions", c.legacyCompaction},
		{"dangling calls carried by a checkpoint", c.danglingCarried},
	}
}

// checkSeed replays one generated log both ways; it returns a description of
// the difference, or "".
func checkSeed(t *testing.T, seed int64, mut mutation, cov *coverage) string {
	t.Helper()
	cfg := configFor(seed)
	log := rollout.MemOf("gen", gen.All(cfg))
	naiveSt, trace, err := naive(log, Options{}, nil, false)
	if err != nil {
		t.Fatalf("seed %d: naive: %v", seed, err)
	}
	fastSt, err := fast(log, Options{}, mut)
	if err != nil {
		t.Fatalf("seed %d: fast: %v", seed, err)
	}
	if cov != nil {
		cov.add(t, log, cfg, trace, fastSt)
	}
	return stateDiff(naiveSt, fastSt)
}

func (c *coverage) add(t *testing.T, log *rollout.Mem, cfg gen.Config, tr *naiveTrace, st *State) {
	t.Helper()
	if cfg.V0 {
		c.versionZero++
	}
	if tr.exceeded > 0 {
		c.rollbackExceedsTurns++
	}
	for _, w := range tr.warnings {
		switch w.Code {
		case WarnMissingBaseline:
			c.patchWithoutBaseline++
		case WarnLegacyCompaction:
			c.legacyCompaction++
		}
	}
	cur, err := log.Forward(0)
	if err != nil {
		t.Fatal(err)
	}
	var turnOpen, afterTerminal, across, midTurn, between, rolledCheckpoint bool
	var lastCompaction int64 = -1
	for {
		e, err := cur.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f := classify(e)
		switch {
		case f.k == kTaskStarted:
			turnOpen, afterTerminal = true, false
		case f.k == kTerminal:
			turnOpen, afterTerminal = false, true
		case f.k == kCompacted:
			if turnOpen {
				midTurn = true
			}
			if f.hasReplacement {
				lastCompaction = f.off()
			}
			for _, cut := range tr.cuts {
				if cut.lo <= f.off() && f.off() <= cut.hi {
					across = true
					if f.hasReplacement {
						rolledCheckpoint = true
					}
				}
			}
		}
		if afterTerminal && f.k != kTerminal && f.k != kTaskStarted {
			between = true
		}
	}
	_ = lastCompaction
	if across {
		c.rollbackAcrossCompaction++
	}
	if rolledCheckpoint {
		c.checkpointRolledBack++
	}
	if midTurn {
		c.midTurnCompaction++
	}
	if between {
		c.recordsBetweenTurns++
	}
	if len(st.DanglingCalls) > 0 && st.Replay.StartOrdinal > 1 {
		c.danglingCarried++
	}
}

// TestFastEqualsNaive is the property test of rule 7: over many generated
// logs the fast path gives exactly the state of the naive fold.
func TestFastEqualsNaive(t *testing.T) {
	var cov coverage
	n := logsToCheck()
	for i := int64(0); i < n; i++ {
		seed := *propSeed + i
		if diff := checkSeed(t, seed, mutation{}, &cov); diff != "" {
			t.Fatalf("seed %d: %s\nreproduce: go test ./internal/replay -run TestFastEqualsNaive -prop.seed=%d -prop.logs=1", seed, diff, seed)
		}
	}
	for _, c := range cov.each() {
		t.Logf("coverage: %-40s %d logs", c.name, c.n)
		if c.n == 0 && n >= 1000 {
			t.Errorf("coverage: no generated log exercised %q", c.name)
		}
	}
}

// TestPropertyCatchesMutant proves the property test can fail: a fast path
// that accepts compactions inside rolled-back turns as its checkpoint must be
// caught within the same seeds.
func TestPropertyCatchesMutant(t *testing.T) {
	n := logsToCheck()
	for i := int64(0); i < n; i++ {
		seed := *propSeed + i
		if diff := checkSeed(t, seed, mutation{compactionsInRolledBackTurns: true}, nil); diff != "" {
			t.Logf("mutant caught at seed %d after %d logs", seed, i+1)
			return
		}
	}
	t.Fatalf("a fast path that ignores rollbacks over compactions passed %d generated logs: the property test is too weak", n)
}

// logsToCheck is -prop.logs, or 10,000 (1,000 with -short: make test runs the
// race-detector pass short and the full 10,000 without it).
func logsToCheck() int64 {
	switch {
	case *propLogs > 0:
		return int64(*propLogs)
	case testing.Short():
		return 1000
	default:
		return 10000
	}
}
