package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// millionThreads is an index file holding 1,000,000 thread rows (and their
// FTS rows) written directly: the scale at which LIKE and FTS5 trigram
// search were measured against each other.
const millionThreads = 1_000_000

func millionSet(b *testing.B) string {
	s := &benchFixtures.million
	s.once.Do(func() {
		var dir string
		if dir, s.err = os.MkdirTemp("", "logbook-bench-million-"); s.err != nil {
			return
		}
		benchFixtures.tmp = append(benchFixtures.tmp, dir)
		s.dir = filepath.Join(dir, datadir.Index)
		t0 := time.Now()
		s.err = fillThreads(s.dir, millionThreads)
		b.Logf("%d thread rows written in %v", millionThreads, time.Since(t0).Round(time.Second))
	})
	if s.err != nil {
		b.Fatal(s.err)
	}
	return s.dir
}

// fillThreads writes n threads: titles of 3 to 6 common words, a first
// message holding "request" and a ticket number unique to the thread, a cwd
// naming one of twelve teams.
func fillThreads(path string, n int) error {
	ctx := context.Background()
	ix, err := OpenFile(ctx, path, Options{})
	if err != nil {
		return err
	}
	defer ix.Close()
	rng := rand.New(rand.NewPCG(5, 5))
	vocab := []string{"fix", "login", "timeout", "deploy", "staging", "retry", "schema", "migration", "cache", "flaky", "test", "refactor",
		"parser", "latency", "upgrade", "rollback", "config", "metrics", "alerts", "docs", "review", "bug", "crash", "memory"}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 10_000
	for start := 0; start < n; start += batch {
		tx, err := ix.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		st, err := tx.PrepareContext(ctx, `INSERT INTO threads (thread_id, title, first_message, model, cwd, created_at, updated_at,
			status, current_rollout_id, rollouts) VALUES (?, ?, ?, ?, ?, ?, ?, 'completed', ?, 1)`)
		if err != nil {
			return err
		}
		for i := start; i < min(start+batch, n); i++ {
			words := make([]string, 3+rng.IntN(4))
			for k := range words {
				words[k] = vocab[rng.IntN(len(vocab))]
			}
			title := strings.Join(words, " ")
			created := base.Add(time.Duration(i) * 30 * time.Second).Format(time.RFC3339)
			id := fmt.Sprintf("thread-%07d", i)
			if _, err := st.ExecContext(ctx, id, title, fmt.Sprintf("request: %s (ticket-%d)", title, i),
				[]string{"gpt-5", "gpt-5-mini", "model-large"}[i%3], fmt.Sprintf("/src/%s/proj-%d", benchWords[i%len(benchWords)], i%1000),
				created, created, "r"+id); err != nil {
				return err
			}
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkSearchMillion compares LIKE with the FTS5 trigram index on
// 1,000,000 threads: the first page of a search for a rare, a medium, a
// common and an absent term, and a page 900,000 threads deep.
func BenchmarkSearchMillion(b *testing.B) {
	path := millionSet(b)
	ctx := context.Background()
	r, err := OpenReader(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var c cursor
	if err := r.db.QueryRowContext(ctx, "SELECT created_at, thread_id FROM threads ORDER BY created_at DESC, thread_id DESC LIMIT 1 OFFSET 900000").
		Scan(&c.Created, &c.Thread); err != nil {
		b.Fatal(err)
	}
	c.V, c.Search = 1, searchHash("")
	b.Run("deep-page", func(b *testing.B) {
		for range b.N {
			if _, err := r.Threads(ctx, ThreadQuery{Cursor: encodeCursor(c)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, m := range []struct {
		name string
		m    SearchMethod
	}{{"auto", SearchAuto}, {"fts", SearchFTS}, {"like", SearchLike}} {
		for _, q := range []struct{ name, s string }{
			{"rare", "ticket-424242"}, {"medium", "payments"}, {"common", "request"}, {"two-words", "deploy latency"}, {"none", "nowhere"},
		} {
			b.Run(m.name+"/"+q.name, func(b *testing.B) {
				n := 0
				for range b.N {
					p, err := r.Threads(ctx, ThreadQuery{Search: q.s, Method: m.m})
					if err != nil {
						b.Fatal(err)
					}
					n = len(p.Threads)
				}
				b.ReportMetric(float64(n), "rows")
			})
		}
	}
}
