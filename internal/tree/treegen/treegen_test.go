package treegen_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/tree"
	"github.com/logbook-agents/logbook/internal/tree/treegen"
)

// files reads every file under dir, by path relative to dir.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSameSeedSameBytesWhateverTheCores(t *testing.T) {
	cfg := treegen.Config{Seed: 3, Fanout: 4, Depth: 3, Turns: 3, Unreceived: 0.2}
	a, b := t.TempDir(), t.TempDir()
	if _, err := treegen.Write(a, cfg); err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if _, err := treegen.Write(b, cfg); err != nil {
		t.Fatal(err)
	}
	fa, fb := files(t, a), files(t, b)
	if len(fa) != cfg.Threads() || len(fa) != len(fb) {
		t.Fatalf("%d and %d files, want %d", len(fa), len(fb), cfg.Threads())
	}
	for p, x := range fa {
		if !bytes.Equal(x, fb[p]) {
			t.Fatalf("%s differs between two writes of the same config", p)
		}
	}
	c := t.TempDir()
	cfg.Seed = 4
	if _, err := treegen.Write(c, cfg); err != nil {
		t.Fatal(err)
	}
	same := 0
	for p := range files(t, c) {
		if _, ok := fa[p]; ok {
			same++
		}
	}
	if same != 0 {
		t.Fatalf("seeds 3 and 4 share %d file names", same)
	}
}

func TestTreeHasTheShapeAsked(t *testing.T) {
	for _, cfg := range []treegen.Config{
		{Seed: 1, Fanout: 3, Depth: 2, Turns: 4},
		{Seed: 2, Fanout: 5, Depth: 2, Turns: 1, Unreceived: 0.5},
		{Seed: 3, Fanout: 2, Depth: 4, Turns: 2, Unreceived: 1},
		{Seed: 4, Fanout: 7, Depth: 0, Turns: 3},
	} {
		dir := t.TempDir()
		st, err := treegen.Write(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := cfg.Threads()
		// 1 session_meta + 9 records a turn per thread; 5 records an edge
		// (spawn, task sent and received, result sent), less the receipts
		// left out.
		wantRecords := int64(n*(1+9*cfg.Turns) + 5*(n-1) - st.Unreceived)
		if st.Threads != n || st.Edges != n-1 || st.Records != wantRecords || st.Root != treegen.ID(cfg) {
			t.Fatalf("%+v: stats %+v, want %d threads, %d records, root %s", cfg, st, n, wantRecords, treegen.ID(cfg))
		}
		if cfg.Unreceived == 0 && st.Unreceived != 0 || cfg.Unreceived == 1 && st.Unreceived != n-1 {
			t.Fatalf("%+v: %d results unreceived", cfg, st.Unreceived)
		}
		c, err := tree.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		tr := tree.Build(c, tree.Options{})
		if len(tr.Problems) != 0 || len(c.Warnings) != 0 || len(tr.Roots) != 1 || len(tr.Orphans) != 0 {
			t.Fatalf("%+v: problems %v, warnings %v, %d roots, orphans %v", cfg, tr.Problems, c.Warnings, len(tr.Roots), tr.Orphans)
		}
		// Walk the tree: every thread where ID says, with Fanout children.
		var walk func(nd *tree.Node, path []int) int
		walk = func(nd *tree.Node, path []int) int {
			if nd.ThreadID != treegen.ID(cfg, path...) {
				t.Fatalf("%+v: node at %v is %s, want %s", cfg, path, nd.ThreadID, treegen.ID(cfg, path...))
			}
			want := cfg.Fanout
			if len(path) == cfg.Depth {
				want = 0
			}
			if len(nd.Children) != want {
				t.Fatalf("%+v: %s has %d children, want %d", cfg, nd.ThreadID, len(nd.Children), want)
			}
			count := 1
			for _, ch := range nd.Children {
				i := 0
				for treegen.ID(cfg, append(path[:len(path):len(path)], i)...) != ch.ThreadID {
					if i++; i > cfg.Fanout {
						t.Fatalf("%+v: %s is not a child of %s", cfg, ch.ThreadID, nd.ThreadID)
					}
				}
				count += walk(ch, append(path[:len(path):len(path)], i))
			}
			return count
		}
		if got := walk(tr.Roots[0], nil); got != n {
			t.Fatalf("%+v: the tree holds %d threads, want %d", cfg, got, n)
		}
		states := map[string]int{}
		for _, d := range tr.Deliveries {
			states[d.State]++
		}
		if len(tr.Deliveries) != 2*(n-1) || states[dedupe.Confirmed] != 2*(n-1)-st.Unreceived || states[dedupe.Unconfirmed] != st.Unreceived {
			t.Fatalf("%+v: deliveries %v, want %d confirmed and %d unconfirmed", cfg, states, 2*(n-1)-st.Unreceived, st.Unreceived)
		}
		if len(tr.ChildResults) != st.Unreceived {
			t.Fatalf("%+v: %d child results unconfirmed, want %d", cfg, len(tr.ChildResults), st.Unreceived)
		}
	}
}

func TestFilesAreLaidOutLikeCodexSessions(t *testing.T) {
	dir := t.TempDir()
	cfg := treegen.Config{Seed: 9, Fanout: 2, Depth: 1, Turns: 2}
	if _, err := treegen.Write(dir, cfg); err != nil {
		t.Fatal(err)
	}
	for p := range files(t, dir) {
		parts := strings.Split(filepath.ToSlash(p), "/")
		if len(parts) != 4 || parts[0] != "2026" || parts[1] != "12" || parts[2] != "01" ||
			!strings.HasPrefix(parts[3], "rollout-2026-12-01T") || !strings.HasSuffix(parts[3], ".jsonl") {
			t.Fatalf("file %s is not YYYY/MM/DD/rollout-<time>-<id>.jsonl", p)
		}
	}
}

func TestBadConfigAndASecondWriteAreRefused(t *testing.T) {
	dir := t.TempDir()
	for _, cfg := range []treegen.Config{
		{Fanout: 2, Depth: 1, Turns: 0},
		{Fanout: -1, Depth: 1, Turns: 1},
		{Fanout: 2, Depth: 1, Turns: 1, Unreceived: 1.5},
	} {
		if _, err := treegen.Write(dir, cfg); err == nil {
			t.Fatalf("%+v: no error", cfg)
		}
	}
	if fs := files(t, dir); len(fs) != 0 {
		t.Fatalf("a refused config wrote %d files", len(fs))
	}
	cfg := treegen.Config{Seed: 1, Fanout: 2, Depth: 1, Turns: 1}
	if _, err := treegen.Write(dir, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := treegen.Write(dir, cfg); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("a second write of the same tree: %v", err)
	}
}
