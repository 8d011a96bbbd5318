package tree_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook-agents/logbook/internal/tree"
	"github.com/logbook-agents/logbook/internal/tree/treegen"
)

// BenchmarkFullScan is the offline path of `tree --rollouts` and
// `unconfirmed --rollouts`: LoadDir and Build over a generated tree of
// 1,111 threads (fanout 10, depth 3, 8 turns), cached under $TMPDIR.
func BenchmarkFullScan(b *testing.B) {
	cfg := treegen.Config{Seed: 1, Fanout: 10, Depth: 3, Turns: 8, Unreceived: 0.01}
	dir := filepath.Join(os.TempDir(), "logbook-bench", "tree-10-3-8")
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		os.RemoveAll(dir)
		if _, err := treegen.Write(dir, cfg); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		c, err := tree.LoadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		t := tree.Build(c, tree.Options{})
		if len(t.Roots) != 1 {
			b.Fatalf("%d roots", len(t.Roots))
		}
	}
}
