package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

var words = []string{"migrate", "login", "timeout", "deploy", "staging", "retry", "schema", "index", "cache", "flaky", "test", "α-β"}

// addThread appends a small thread to the index through Apply.
func addThread(t testing.TB, ix *Index, n int, created time.Time, title string) {
	t.Helper()
	b := rollout.Builder{Now: clock(created)}
	id := fmt.Sprintf("t%06d", n)
	recs := []rollout.Record{
		b.Meta(rollout.SessionMeta{ID: id, RolloutID: "r" + id[1:], Source: rollout.Source{Kind: "cli"}, Cwd: fmt.Sprintf("/src/proj%d", n%5)}),
		b.TaskStarted("a"),
		b.UserMessage(title),
		b.TurnContext(rollout.TurnContext{Model: []string{"gpt-5", "model-large"}[n%2], ApprovalPolicy: "never"}),
		b.TaskComplete("a"),
	}
	if err := ix.Apply(context.Background(), "r"+id[1:], memEntries(t, rollout.MemOf(id, recs))); err != nil {
		t.Fatal(err)
	}
}

func randomTitle(rng *rand.Rand) string {
	n := 2 + rng.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[rng.IntN(len(words))]
	}
	return strings.Join(parts, " ")
}

// pageAll reads every page of a query.
func pageAll(t testing.TB, q *queries, tq ThreadQuery, between func()) []Thread {
	t.Helper()
	var all []Thread
	for {
		p, err := q.Threads(context.Background(), tq)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Threads...)
		if p.NextCursor == "" {
			return all
		}
		tq.Cursor = p.NextCursor
		if between != nil {
			between()
		}
	}
}

func ids(ts []Thread) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// TestThreadsSearchAndPaging: pages are newest first and complete; FTS and
// LIKE agree on every search, short words and case included; a cursor is
// tied to its search.
func TestThreadsSearchAndPaging(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	ctx := context.Background()
	ix, err := OpenFile(ctx, t.TempDir()+"/x.db", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	titles := map[string]string{}
	nThreads := short(300, 120)
	for n := range nThreads {
		// Several threads share a creation time: the thread id breaks ties.
		title := randomTitle(rng)
		addThread(t, ix, n, base.Add(time.Duration(rng.IntN(100))*time.Minute), title)
		titles[fmt.Sprintf("t%06d", n)] = title
	}
	all := pageAll(t, &ix.queries, ThreadQuery{Limit: 1000}, nil)
	if len(all) != nThreads {
		t.Fatalf("%d threads listed, want %d", len(all), nThreads)
	}
	if !slices.IsSortedFunc(all, func(a, b Thread) int {
		return -strings.Compare(a.CreatedAt+a.ID, b.CreatedAt+b.ID)
	}) {
		t.Error("threads are not newest first")
	}
	paged := pageAll(t, &ix.queries, ThreadQuery{Limit: 7}, nil)
	if !reflect.DeepEqual(ids(paged), ids(all)) {
		t.Error("paging by 7 does not list the threads of one page")
	}

	for _, s := range []string{"deploy", "DEPLOY staging", "ogi", "ta", "α-β", "gpt-5", "/src/proj3", "retry flaky cache", "nothing-like-this", `"quoted`, "50%", "a_b"} {
		want := []string{}
		for _, th := range all {
			hay := strings.ToLower(titles[th.ID] + "\x00" + th.Cwd + "\x00" + th.Model)
			ok := true
			for _, w := range strings.Fields(strings.ToLower(s)) {
				ok = ok && strings.Contains(hay, w)
			}
			if ok {
				want = append(want, th.ID)
			}
		}
		for _, tq := range []ThreadQuery{{Method: SearchAuto}, {Method: SearchAuto, budget: 9}, {Method: SearchFTS}, {Method: SearchLike}} {
			tq.Search, tq.Limit = s, 5
			m := tq.Method*100 + SearchMethod(tq.budget)
			got := ids(pageAll(t, &ix.queries, tq, nil))
			if len(got) == 0 {
				got = []string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("search %q (method %d): %d threads, want %d", s, m, len(got), len(want))
			}
		}
	}

	p, err := ix.Threads(ctx, ThreadQuery{Search: "deploy", Limit: 2})
	if err != nil || p.NextCursor == "" {
		t.Fatalf("%v %+v", err, p)
	}
	if _, err := ix.Threads(ctx, ThreadQuery{Search: "staging", Cursor: p.NextCursor}); !errors.Is(err, ErrBadCursor) {
		t.Errorf("cursor of another search: %v", err)
	}
	if _, err := ix.Threads(ctx, ThreadQuery{Cursor: "garbage"}); !errors.Is(err, ErrBadCursor) {
		t.Errorf("garbage cursor: %v", err)
	}
}

// TestPagingStableUnderInserts: threads indexed between pages, newer and
// older than the cursor, never make a page skip or repeat a thread.
func TestPagingStableUnderInserts(t *testing.T) {
	ctx := context.Background()
	ix, err := OpenFile(ctx, t.TempDir()+"/x.db", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	rng := rand.New(rand.NewPCG(4, 4))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for n := range short(200, 80) {
		addThread(t, ix, n, base.Add(time.Duration(rng.IntN(50))*time.Minute), "deploy "+randomTitle(rng))
	}
	before := pageAll(t, &ix.queries, ThreadQuery{Limit: 1000}, nil)
	next := 1000
	for _, search := range []string{"", "deploy"} {
		got := pageAll(t, &ix.queries, ThreadQuery{Limit: 9, Search: search, budget: 12}, func() {
			for range 5 {
				// Before, among and after the pages already read.
				addThread(t, ix, next, base.Add(time.Duration(rng.IntN(80)-15)*time.Minute), "deploy new")
				next++
			}
		})
		seen := map[string]int{}
		for _, th := range got {
			seen[th.ID]++
		}
		for id, n := range seen {
			if n > 1 {
				t.Errorf("search %q: %s listed %d times", search, id, n)
			}
		}
		for _, th := range before {
			if seen[th.ID] != 1 {
				t.Errorf("search %q: %s skipped", search, th.ID)
			}
		}
		if !slices.IsSortedFunc(got, func(a, b Thread) int { return -strings.Compare(a.CreatedAt+a.ID, b.CreatedAt+b.ID) }) {
			t.Errorf("search %q: pages out of order", search)
		}
	}
}
