package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// releaseDataDir is a data dir whose mirror holds the release-tree example.
func releaseDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rd := datadir.RolloutsDir(dir)
	if err := os.MkdirAll(rd, 0o700); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(examplesDir, "release-tree")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rd, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLineageFromTheIndex: tree and unconfirmed --data answer from the
// index exactly what the full scan of the same files (--rollouts) answers,
// whole, for a subtree and for one thread; with the mirror files gone they
// still answer (a query, not a replay); without an index they say so and
// read the files.
func TestLineageFromTheIndex(t *testing.T) {
	dir := releaseDataDir(t)
	rd := datadir.RolloutsDir(dir)
	cases := [][]string{{"tree", "--json"}, {"tree"}, {"tree", "release-P", "--json"}, {"tree", "release-B"},
		{"unconfirmed", "--json"}, {"unconfirmed"}, {"unconfirmed", "release-C", "--json"}, {"unconfirmed", "--state", "no_result"},
		{"tree", "--state", "needs_attention", "--json"}, {"unconfirmed", "release-P", "--limit", "1", "--json"},
		{"tree", "release-B", "--limit", "1", "--json"}, {"tree", "--thread", "release-P", "--state", "idle"}}
	scans := map[string]string{}
	for _, c := range cases {
		r := runCLI(t, append(c, "--rollouts", rd)...)
		r.wantCode(t, exitOK)
		scans[strings.Join(c, " ")] = r.stdout
	}
	noIndex := runCLI(t, "tree", "--data", dir)
	noIndex.wantCode(t, exitOK)
	if !strings.Contains(noIndex.stderr, "reading every mirror file") || noIndex.stdout != scans["tree"] {
		t.Errorf("tree --data without an index: stderr %q\n%s", noIndex.stderr, noIndex.stdout)
	}
	runCLI(t, "reindex", "--data", dir).wantCode(t, exitOK)
	check := func(when string) {
		for _, c := range cases {
			r := runCLI(t, append(c, "--data", dir)...)
			r.wantCode(t, exitOK)
			if r.stderr != "" {
				t.Errorf("%s: %v --data: stderr %q", when, c, r.stderr)
			}
			// The next-page hint names the source it was given.
			got := strings.ReplaceAll(r.stdout, "--data "+dir, "--rollouts "+rd)
			if want := scans[strings.Join(c, " ")]; got != want {
				t.Errorf("%s: %v --data:\n%s\nthe full scan (--rollouts):\n%s", when, c, got, want)
			}
		}
	}
	check("indexed")
	for _, id := range []string{"no-such-thread", "release-"} {
		scan, ix := runCLI(t, "tree", "--rollouts", rd, id), runCLI(t, "tree", "--data", dir, id)
		ix.wantCode(t, exitFailure)
		if ix.stderr != scan.stderr || ix.stdout != "" || strings.Count(ix.stderr, "\n") != 1 {
			t.Errorf("tree --data %s: %q, the full scan %q", id, ix.stderr, scan.stderr)
		}
	}
	if err := os.Rename(rd, rd+".away"); err != nil {
		t.Fatal(err)
	}
	check("the mirror files moved away")
}

// TestLineagePages: --limit pages tree nodes in tree order and
// unconfirmed's lists, each page ending with the cursor of the next; the
// pages together are the unpaged answer; a cursor of another query, or not
// a cursor, fails.
func TestLineagePages(t *testing.T) {
	dir := releaseDataDir(t)
	runCLI(t, "reindex", "--data", dir).wantCode(t, exitOK)
	for _, src := range [][]string{{"--data", dir}, {"--rollouts", datadir.RolloutsDir(dir)}} {
		var whole treeDoc
		r := runCLI(t, append([]string{"tree", "--json"}, src...)...)
		r.wantCode(t, exitOK)
		strictJSON(t, "tree --json", r.stdout, &whole)
		var want []string
		var walk func(ns []*nodeDoc)
		walk = func(ns []*nodeDoc) {
			for _, n := range ns {
				want = append(want, n.ThreadID)
				walk(n.Children)
			}
		}
		walk(whole.Roots)
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			args := append([]string{"tree", "--json", "--limit", "1"}, src...)
			if after != "" {
				args = append(args, "--after", after)
			}
			r := runCLI(t, args...)
			r.wantCode(t, exitOK)
			var p treePageDoc
			strictJSON(t, "tree --limit --json", r.stdout, &p)
			if len(p.Nodes) != 1 {
				t.Fatalf("%v: page %d has %d nodes", src, pages, len(p.Nodes))
			}
			got = append(got, p.Nodes[0].ThreadID)
			if after = p.NextCursor; after == "" {
				break
			}
			if pages > 10 {
				t.Fatal("tree --limit 1: no last page")
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: tree pages %v, want the tree order %v", src, got, want)
		}

		var all unconfirmedDoc
		r = runCLI(t, append([]string{"unconfirmed", "--json", "--state", "confirmed"}, src...)...)
		r.wantCode(t, exitOK)
		strictJSON(t, "unconfirmed --state confirmed --json", r.stdout, &all)
		if len(all.Deliveries) != 3 || all.Confirmed != 3 || len(all.ChildResults) != 0 {
			t.Errorf("%v: unconfirmed --state confirmed: %+v", src, all)
		}
		var paged []deliveryDoc
		after = ""
		for pages := 0; ; pages++ {
			args := append([]string{"unconfirmed", "--json", "--state", "confirmed", "--limit", "2"}, src...)
			if after != "" {
				args = append(args, "--after", after)
			}
			r := runCLI(t, args...)
			r.wantCode(t, exitOK)
			var p unconfirmedDoc
			strictJSON(t, "unconfirmed --limit --json", r.stdout, &p)
			paged = append(paged, p.Deliveries...)
			if after = p.NextCursor; after == "" {
				break
			}
			if pages > 10 {
				t.Fatal("unconfirmed --limit 2: no last page")
			}
		}
		if !reflect.DeepEqual(paged, all.Deliveries) {
			t.Errorf("%v: unconfirmed pages %+v, want %+v", src, paged, all.Deliveries)
		}

		first := runCLI(t, append([]string{"tree", "--json", "--limit", "1"}, src...)...)
		var p treePageDoc
		strictJSON(t, "tree --limit --json", first.stdout, &p)
		runCLI(t, append([]string{"tree", "--state", "idle", "--after", p.NextCursor}, src...)...).wantOneLineError(t, "cursor")
		runCLI(t, append([]string{"unconfirmed", "--after", "bogus"}, src...)...).wantOneLineError(t, "cursor")
		runCLI(t, append([]string{"unconfirmed", "no-such-thread"}, src...)...).wantOneLineError(t, "no-such-thread")
	}
}
