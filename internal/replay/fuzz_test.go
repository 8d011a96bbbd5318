package replay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// FuzzReplay runs both replay paths over arbitrary bytes: neither may panic,
// and on input without damage they must agree (a differential check of the
// fast path beyond what the generator writes).
func FuzzReplay(f *testing.F) {
	for _, recs := range [][]rollout.Record{chapterLog(1), chapterLog(3), midTurnLog()} {
		f.Add(rollout.MemOf("seed", recs).Bytes())
	}
	for seed := int64(1); seed <= 8; seed++ {
		cfg := configFor(seed)
		cfg.Records = 40
		f.Add(rollout.MemOf("seed", gen.All(cfg)).Bytes())
	}
	if small, err := filepath.Glob("../../testdata/codex-real/sessions/*/*/*/*13-19-38*.jsonl"); err == nil && len(small) == 1 {
		if data, err := os.ReadFile(small[0]); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		log := rollout.NewMem("fuzz", data)
		naiveSt, errN := Naive(log, Options{})
		fastSt, errF := Fast(log, Options{})
		_, _ = Naive(log, Options{Salvage: true})
		_, _ = Fast(log, Options{Salvage: true})
		if errN != nil || errF != nil || naiveSt.Replay.CorruptLines > 0 || naiveSt.Replay.TornTail {
			return
		}
		if diff := stateDiff(naiveSt, fastSt); diff != "" {
			t.Fatalf("fast and naive differ on clean input: %s", diff)
		}
	})
}
