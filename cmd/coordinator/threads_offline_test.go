package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestThreadsOffline: any directory of rollout files pages and searches
// without an index or a server.
func TestThreadsOffline(t *testing.T) {
	var seen []string
	cursor := ""
	for page := 0; page < 10; page++ {
		args := []string{"threads", "--rollouts", "../../testdata", "--limit", "3", "--json"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		r := runCLI(t, args...)
		r.wantCode(t, exitOK)
		var got struct {
			Threads []struct {
				ID string `json:"thread_id"`
			}
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatal(err)
		}
		for _, th := range got.Threads {
			seen = append(seen, th.ID)
		}
		if cursor = got.NextCursor; cursor == "" {
			break
		}
	}
	// The six Codex sessions, thread-A, -A2 and -A3 (the chapter's rollback
	// of 1, 2 and 3 turns), thread-M, thread-R, and the three release
	// threads that wrote lines.
	if len(seen) != 14 {
		t.Errorf("paged through %d threads: %v", len(seen), seen)
	}
	dup := map[string]bool{}
	for _, id := range seen {
		if dup[id] {
			t.Errorf("%s listed twice", id)
		}
		dup[id] = true
	}
	r := runCLI(t, "threads", "--rollouts", "../../testdata", "--search", "ship 1.4.2")
	r.wantCode(t, exitOK)
	r.wantOut(t, "release-P", "1 thread; no more pages.")
	r = runCLI(t, "threads", "--rollouts", "../../testdata", "--data", "x") // a usage error
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "not both") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestOfflineThreadPrefixes: replay --rollouts and tree accept a thread id
// prefix naming one thread, as show does, and refuse an ambiguous one
// naming two of its matches.
func TestOfflineThreadPrefixes(t *testing.T) {
	r := runCLI(t, "replay", "--rollouts", "../../testdata", "019c8a4c")
	r.wantCode(t, exitOK)
	r.wantOut(t, "019c8a4c-ed82-79a1-aa28-7738fc5ab61a")
	runCLI(t, "replay", "--rollouts", "../../testdata", "019c8a4").wantOneLineError(t,
		"ambiguous thread id prefix", "019c8a4c-ed82-79a1-aa28-7738fc5ab61a", "019c8a4d-8f45-7010-8b5d-7fad920aa6f9")
	runCLI(t, "replay", "--rollouts", "../../testdata", "nope").wantOneLineError(t, "unknown thread nope")
	r = runCLI(t, "tree", "--rollouts", "../../testdata/examples/release-tree", "release-B")
	r.wantCode(t, exitOK)
	r.wantOut(t, "release-B")
	runCLI(t, "tree", "--rollouts", "../../testdata/examples/release-tree", "release-").wantOneLineError(t, "ambiguous thread id prefix", "release-A")
}
