package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// TestTreeShowsActive: while a writer holds a thread's lease on the bus a
// data dir names, `tree --data` shows that thread `active` (and only it);
// once the lease is released, the thread's own status comes back.
func TestTreeShowsActive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bus")
	}
	tb := streamtest.New(t, streamtest.Options{})
	dir := t.TempDir()
	if err := os.MkdirAll(datadir.RolloutsDir(dir), 0o700); err != nil {
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
		if err := os.WriteFile(filepath.Join(datadir.RolloutsDir(dir), e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(datadir.URLPath(dir), []byte(tb.Server.ClientURL()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	statusOf := func(out, thread string) string {
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(strings.TrimLeft(l, "├└─│ "))
			if len(f) >= 2 && f[0] == thread {
				return f[1]
			}
		}
		t.Fatalf("tree does not list %s:\n%s", thread, out)
		return ""
	}
	before := runCLI(t, "tree", "--data", dir, "release-P")
	before.wantCode(t, exitOK)
	if s := statusOf(before.stdout, "release-B"); s != "needs_attention" {
		t.Fatalf("release-B before its lease is taken: %s, want needs_attention", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := tb.TakeLease(ctx, "release-B", stream.LeaseOptions{Holder: "test-agent"})
	if err != nil {
		t.Fatal(err)
	}
	during := runCLI(t, "tree", "--data", dir, "release-P")
	during.wantCode(t, exitOK)
	if s := statusOf(during.stdout, "release-B"); s != "active" {
		t.Fatalf("release-B while its lease is held: %s, want active:\n%s", s, during.stdout)
	}
	if s := statusOf(during.stdout, "release-A"); s != "idle" {
		t.Fatalf("release-A (no lease): %s, want idle", s)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	after := runCLI(t, "tree", "--data", dir, "release-P")
	if s := statusOf(after.stdout, "release-B"); s != "needs_attention" {
		t.Fatalf("release-B after its lease is released: %s, want needs_attention", s)
	}
}
