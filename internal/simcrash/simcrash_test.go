package simcrash

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func testEnv(t *testing.T) *Env {
	t.Helper()
	ctx := context.Background()
	e, err := NewEnv(ctx, EnvOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestCleanRuns(t *testing.T) {
	e := testEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, tree := range Trees {
		start := time.Now()
		res := Run(ctx, e, Scenario{Tree: tree, Seed: 1}, fmt.Sprintf("c%d", i))
		t.Logf("%s: %v processes=%d counts=%v effects=%d records=%d acked=%d problems=%v", tree, time.Since(start), res.Processes, res.Counts, res.Effects, res.Records, res.Acked, res.Problems)
		if res.Failed() {
			t.Errorf("%s: %v", tree, res.Problems)
		}
	}
}
