package mirror

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestVerifyBus: VerifyBus finds a mirrored record that differs from the
// bus and a mirror file that holds more than the bus; one that lags is only
// behind.
func TestVerifyBus(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	for _, id := range []string{"same", "changed", "longer", "shorter", "stale"} {
		w := e.openWriter(id, nil)
		w.items(5, "x")
		w.close()
	}
	// A stale pack (epoch 0) continuing "stale": the bus holds it, but the
	// valid-tail rule does not accept it.
	stale := packMsg("rollout.stale", 7, 0, itemLine(7, "stale"))
	e.publish(stale)
	e.caughtUp(r)
	r.stop()
	edit := func(id string, f func([]byte) []byte) {
		t.Helper()
		b, err := os.ReadFile(e.plain(id))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.plain(id), f(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A record replaced by another valid one (crc recomputed): only the
	// comparison with the bus can tell.
	edit("changed", func(b []byte) []byte {
		lines := bytes.SplitAfter(b, []byte("\n"))
		lines[3] = append(itemLine(4, "forged"), '\n')
		return bytes.Join(lines, nil)
	})
	// A mirror that accepted the stale pack (as one before the epoch
	// check did): verify must call it a divergence.
	edit("stale", func(b []byte) []byte { return append(b, stale.Data...) })
	edit("longer", func(b []byte) []byte { return append(b, append(itemLine(7, "extra"), '\n')...) })
	edit("shorter", func(b []byte) []byte {
		lines := bytes.SplitAfter(b, []byte("\n"))
		return bytes.Join(lines[:3], nil)
	})
	rep, err := VerifyBus(ctxT(t, 30*time.Second), e.bus, e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Log(p)
	}
	joined := strings.Join(rep.Problems, "\n")
	if len(rep.Problems) != 3 || !strings.Contains(joined, "rollout changed: ordinal 4 differs from the record the bus accepts") ||
		!strings.Contains(joined, "rollout longer: ordinal 7 is in the mirror file, the bus accepts only 6") ||
		!strings.Contains(joined, "rollout stale: ordinal 7 is in the mirror file, the bus accepts only 6") {
		t.Fatalf("problems %q", rep.Problems)
	}
	if len(rep.Behind) != 1 || rep.Behind[0] != "shorter" || rep.Rollouts != 5 {
		t.Fatalf("report %+v", rep)
	}
}
