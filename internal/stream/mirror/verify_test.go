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
	for _, id := range []string{"same", "changed", "longer", "shorter"} {
		e.openWriter(id, nil).items(5, "x")
	}
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
	if len(rep.Problems) != 2 || !strings.Contains(joined, "rollout changed: ordinal 4 differs from the bus") ||
		!strings.Contains(joined, "rollout longer: the mirror file holds ordinal 7, the bus does not") {
		t.Fatalf("problems %q", rep.Problems)
	}
	if len(rep.Behind) != 1 || rep.Behind[0] != "shorter" || rep.Rollouts != 4 {
		t.Fatalf("report %+v", rep)
	}
}
