package index

import (
	"context"
	"strings"
	"unicode/utf8"
)

// SearchMethod says how Threads matches search words.
type SearchMethod int

const (
	// SearchAuto, the default: a LIKE scan in page order over at most
	// likeBudget threads, which fills a page at once for any word that is
	// not rare; when it does not, the trigram index, which is fast exactly
	// for rare words. Measured in docs/BENCHMARKS.md ("Index").
	SearchAuto SearchMethod = iota
	// SearchFTS matches words of three or more characters through the
	// threads_fts trigram index only.
	SearchFTS
	// SearchLike matches every word with LIKE '%word%' over the four
	// columns, scanning threads in page order to the end if need be.
	SearchLike
)

// likeBudget bounds the threads SearchAuto's LIKE scan reads: a word found
// less often than a page in this many threads goes to the trigram index.
const likeBudget = 10_000

// Threads returns a page of threads.
func (q *queries) Threads(ctx context.Context, tq ThreadQuery) (ThreadPage, error) {
	limit := tq.limit()
	var after []any
	if tq.Cursor != "" {
		c, err := decodeCursor(tq.Cursor, tq.Search)
		if err != nil {
			return ThreadPage{}, err
		}
		after = []any{c.Created, c.Thread}
	}
	words := strings.Fields(tq.Search)
	var long []string // words the trigram index can hold
	for _, w := range words {
		if utf8.RuneCountInString(w) >= 3 {
			long = append(long, w)
		}
	}
	method := tq.Method
	if len(long) == 0 {
		method = SearchLike
	}
	if method == SearchAuto {
		budget := likeBudget
		if tq.budget > 0 {
			budget = tq.budget
		}
		page, complete, err := q.likePage(ctx, tq.Search, words, after, limit, budget)
		if err != nil || complete {
			return page, err
		}
		method = SearchFTS
	}
	if method == SearchLike {
		page, _, err := q.likePage(ctx, tq.Search, words, after, limit, 0)
		return page, err
	}
	// The trigram index for the long words, LIKE for the short ones.
	var where []string
	var args []any
	if after != nil {
		where, args = append(where, "(created_at, thread_id) < (?, ?)"), append(args, after...)
	}
	var phrases []string
	for _, w := range words {
		if utf8.RuneCountInString(w) >= 3 {
			phrases = append(phrases, `"`+strings.ReplaceAll(w, `"`, `""`)+`"`)
			continue
		}
		c, a := likeCond(w)
		where, args = append(where, c), append(args, a...)
	}
	where = append(where, "seq IN (SELECT rowid FROM threads_fts WHERE threads_fts MATCH ?)")
	args = append(args, strings.Join(phrases, " AND "))
	query := "SELECT " + threadCols + " FROM threads WHERE " + strings.Join(where, " AND ") +
		" ORDER BY created_at DESC, thread_id DESC LIMIT ?"
	return q.page(ctx, tq.Search, query, append(args, limit+1), limit)
}

// likePage matches every word with LIKE, scanning threads in page order
// after the cursor; with budget > 0 it reads at most budget threads, and
// complete says whether that answered the query (a full page, or no thread
// left unread).
func (q *queries) likePage(ctx context.Context, search string, words []string, after []any, limit, budget int) (ThreadPage, bool, error) {
	var where, conds []string
	var args []any
	if after != nil {
		where, args = append(where, "(created_at, thread_id) < (?, ?)"), append(args, after...)
	}
	var condArgs []any
	for _, w := range words {
		c, a := likeCond(w)
		conds, condArgs = append(conds, c), append(condArgs, a...)
	}
	from := "threads"
	if budget > 0 {
		inner := "SELECT * FROM threads"
		if len(where) > 0 {
			inner += " WHERE " + strings.Join(where, " AND ")
		}
		from = "(" + inner + " ORDER BY created_at DESC, thread_id DESC LIMIT ?)"
		args = append(args, budget)
		where = nil
	}
	where = append(where, conds...)
	args = append(args, condArgs...)
	query := "SELECT " + threadCols + " FROM " + from
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY created_at DESC, thread_id DESC LIMIT ?"
	page, err := q.page(ctx, search, query, append(args, limit+1), limit)
	if err != nil || budget == 0 || page.NextCursor != "" {
		return page, true, err
	}
	// Not a full page: complete only if the scan read every thread left.
	count := "SELECT count(*) FROM (SELECT 1 FROM threads"
	var cargs []any
	if after != nil {
		count += " WHERE (created_at, thread_id) < (?, ?)"
		cargs = append(cargs, after...)
	}
	var n int
	err = q.db.QueryRowContext(ctx, count+" ORDER BY created_at DESC, thread_id DESC LIMIT ?)", append(cargs, budget)...).Scan(&n)
	return page, n < budget, err
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// likeCond matches a word anywhere in the four searched columns.
func likeCond(w string) (string, []any) {
	pat := "%" + likeEscaper.Replace(w) + "%"
	return `(thread_id LIKE ? ESCAPE '\' OR title LIKE ? ESCAPE '\' OR first_message LIKE ? ESCAPE '\' OR cwd LIKE ? ESCAPE '\' OR model LIKE ? ESCAPE '\')`,
		[]any{pat, pat, pat, pat, pat}
}

// page runs a threads query that asks for limit+1 rows.
func (q *queries) page(ctx context.Context, search, query string, args []any, limit int) (ThreadPage, error) {
	rows, err := q.db.QueryContext(ctx, query, args...)
	if err != nil {
		return ThreadPage{}, err
	}
	defer rows.Close()
	page := ThreadPage{Threads: []Thread{}}
	for rows.Next() {
		var t Thread
		if err := rows.Scan(t.fields()...); err != nil {
			return ThreadPage{}, err
		}
		page.Threads = append(page.Threads, t)
	}
	if err := rows.Err(); err != nil {
		return ThreadPage{}, err
	}
	if len(page.Threads) > limit {
		page.Threads = page.Threads[:limit]
		last := page.Threads[limit-1]
		page.NextCursor = encodeCursor(cursor{V: 1, Created: last.CreatedAt, Thread: last.ID, Search: searchHash(search)})
	}
	return page, nil
}
