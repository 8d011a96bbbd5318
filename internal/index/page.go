package index

import (
	"sort"
	"strings"
)

// limit is the page size a query asks for: DefaultLimit when unset, at most
// MaxLimit.
func (tq ThreadQuery) limit() int {
	if tq.Limit <= 0 {
		return DefaultLimit
	}
	return min(tq.Limit, MaxLimit)
}

// PageOf pages threads held in memory (read from rollout files, with no
// index) by the rules of Threads: the same search words, order, page size
// and cursors. tq.Method is ignored: every word is matched as a substring.
func PageOf(all []Thread, tq ThreadQuery) (ThreadPage, error) {
	var kept []Thread
	for _, t := range all {
		if t.matches(tq.Search) {
			kept = append(kept, t)
		}
	}
	newer := func(a, b Thread) bool {
		if a.CreatedAt != b.CreatedAt {
			return a.CreatedAt > b.CreatedAt
		}
		return a.ID > b.ID
	}
	sort.Slice(kept, func(i, j int) bool { return newer(kept[i], kept[j]) })
	start := 0
	if tq.Cursor != "" {
		c, err := decodeCursor(tq.Cursor, tq.Search)
		if err != nil {
			return ThreadPage{}, err
		}
		mark := Thread{ID: c.Thread, CreatedAt: c.Created}
		start = sort.Search(len(kept), func(i int) bool { return newer(mark, kept[i]) })
	}
	limit := tq.limit()
	end := min(start+limit, len(kept))
	page := ThreadPage{Threads: append([]Thread{}, kept[start:end]...)}
	if end < len(kept) {
		last := kept[end-1]
		page.NextCursor = encodeCursor(cursor{V: 1, Created: last.CreatedAt, Thread: last.ID, Search: searchHash(tq.Search)})
	}
	return page, nil
}

// matches is Threads' search in memory: every word of search is in the
// thread's id, title, first message, cwd or model, case-insensitively.
func (t Thread) matches(search string) bool {
	hay := strings.ToLower(strings.Join([]string{t.ID, t.Title, t.FirstMessage, t.Cwd, t.Model}, "\n"))
	for _, w := range strings.Fields(strings.ToLower(search)) {
		if !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}
