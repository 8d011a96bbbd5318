package index

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/logbook-agents/logbook/internal/dedupe"
)

// UnconfirmedQuery asks for one page of `coordinator unconfirmed`: the
// child results still unconfirmed and the deliveries not confirmed.
type UnconfirmedQuery struct {
	// Thread keeps the deliveries from or to it and the child results it is
	// the parent or the child of; "" keeps all. It is a thread id, resolved
	// already (ResolveNode).
	Thread string
	// State keeps the deliveries and child results in that state (one of
	// States); "" keeps every delivery not confirmed and every child result.
	State string
	// Limit bounds each list of a page; 0: no bound.
	Limit int
	// After is the NextCursor of the previous page; "" for the first.
	After string
}

// States are the states UnconfirmedQuery.State may name: the delivery
// states, and no_result (a task whose child sent no result).
var States = []string{dedupe.Confirmed, dedupe.Unconfirmed, dedupe.PossiblyDuplicated, dedupe.OrphanReceipt, dedupe.RolledBackReceipt, dedupe.NoResult}

// UnconfirmedPage is one page: child results by task, result, parent and
// child; deliveries by msg_id and receiver.
type UnconfirmedPage struct {
	ChildResults []dedupe.ChildResult
	Deliveries   []dedupe.Delivery
	// Confirmed counts the confirmed deliveries (of Thread, when given).
	Confirmed int
	// NextCursor fetches the rest; "" when both lists are done. Each list
	// goes on from where it stopped; one that is done stays done.
	NextCursor string
}

type unconfirmedCursor struct {
	V int      `json:"v"`
	C []string `json:"c,omitempty"` // the last child result: task, result, parent, child
	D []string `json:"d,omitempty"` // the last delivery: msg_id, receiver
	// CDone and DDone: that list has no more.
	CDone bool   `json:"cx,omitempty"`
	DDone bool   `json:"dx,omitempty"`
	Q     uint32 `json:"q"`
}

func (uq UnconfirmedQuery) hash() uint32 {
	return searchHash("unconfirmed\x00" + uq.Thread + "\x00" + uq.State)
}

func (uq UnconfirmedQuery) check() error {
	if uq.State != "" && !isState(uq.State) {
		return fmt.Errorf("%w: state %q: use one of %s", ErrBadQuery, uq.State, strings.Join(States, ", "))
	}
	if uq.Limit < 0 {
		return fmt.Errorf("%w: limit %d", ErrBadQuery, uq.Limit)
	}
	return nil
}

func isState(s string) bool {
	for _, x := range States {
		if x == s {
			return true
		}
	}
	return false
}

func (uq UnconfirmedQuery) cursor() (unconfirmedCursor, error) {
	var c unconfirmedCursor
	if uq.After == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(uq.After)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.V != 1 || (c.C != nil && len(c.C) != 4) || (c.D != nil && len(c.D) != 2) {
		return c, fmt.Errorf("%w: %q is not an unconfirmed cursor", ErrBadCursor, uq.After)
	}
	if c.Q != uq.hash() {
		return c, fmt.Errorf("%w: the cursor belongs to another --thread or --state; page with the same ones", ErrBadCursor)
	}
	return c, nil
}

// next makes the cursor of the page after one that ended at the last
// items of its lists; more says whether each list has more.
func (uq UnconfirmedQuery) next(prev unconfirmedCursor, page *UnconfirmedPage, moreC, moreD bool) {
	if !moreC && !moreD {
		return
	}
	c := unconfirmedCursor{V: 1, C: prev.C, D: prev.D, CDone: !moreC, DDone: !moreD, Q: uq.hash()}
	if n := len(page.ChildResults); n > 0 {
		r := page.ChildResults[n-1]
		c.C = []string{r.TaskMsgID, r.ResultMsgID, r.Parent, r.Child}
	}
	if n := len(page.Deliveries); n > 0 {
		d := page.Deliveries[n-1]
		c.D = []string{d.MsgID, d.ToThread}
	}
	b, _ := json.Marshal(c)
	page.NextCursor = base64.RawURLEncoding.EncodeToString(b)
}

// Unconfirmed answers `unconfirmed` from the deliveries table, in one
// snapshot.
func (q *queries) Unconfirmed(ctx context.Context, uq UnconfirmedQuery) (UnconfirmedPage, error) {
	var page UnconfirmedPage
	if err := uq.check(); err != nil {
		return page, err
	}
	cur, err := uq.cursor()
	if err != nil {
		return page, err
	}
	err = q.snapshot(ctx, func(c queryer) error {
		var moreC, moreD bool
		var err error
		if !cur.CDone {
			where, args := []string{"cr_state <> ''"}, []any{}
			if uq.State != "" {
				where, args = append(where, "cr_state = ?"), append(args, uq.State)
			}
			if uq.Thread != "" {
				where, args = append(where, "(cr_parent = ? OR cr_child = ?)"), append(args, uq.Thread, uq.Thread)
			}
			if cur.C != nil {
				where, args = append(where, "(cr_task, cr_result, cr_parent, cr_child) > (?, ?, ?, ?)"),
					append(args, cur.C[0], cur.C[1], cur.C[2], cur.C[3])
			}
			if page.ChildResults, err = childResultsWhere(ctx, c, strings.Join(where, " AND "), pageRows(uq.Limit), args...); err != nil {
				return err
			}
			if uq.Limit > 0 && len(page.ChildResults) > uq.Limit {
				page.ChildResults, moreC = page.ChildResults[:uq.Limit], true
			}
		}
		if !cur.DDone {
			where, args := []string{"state <> 'confirmed'"}, []any{}
			if uq.State != "" {
				where, args = []string{"state = ?"}, []any{uq.State}
			}
			if uq.Thread != "" {
				where, args = append(where, "(from_thread = ? OR to_thread = ?)"), append(args, uq.Thread, uq.Thread)
			}
			if cur.D != nil {
				where, args = append(where, "(msg_id, to_thread) > (?, ?)"), append(args, cur.D[0], cur.D[1])
			}
			if page.Deliveries, err = deliveriesWhere(ctx, c, strings.Join(where, " AND "), pageRows(uq.Limit), args...); err != nil {
				return err
			}
			if uq.Limit > 0 && len(page.Deliveries) > uq.Limit {
				page.Deliveries, moreD = page.Deliveries[:uq.Limit], true
			}
		}
		uq.next(cur, &page, moreC, moreD)
		if uq.Thread != "" {
			// Two index lookups, not a scan of every confirmed delivery.
			return c.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM deliveries WHERE from_thread = ?1 AND state = 'confirmed')
				+ (SELECT count(*) FROM deliveries WHERE to_thread = ?1 AND from_thread <> ?1 AND state = 'confirmed')`,
				uq.Thread).Scan(&page.Confirmed)
		}
		return c.QueryRowContext(ctx, `SELECT count(*) FROM deliveries WHERE state = 'confirmed'`).Scan(&page.Confirmed)
	})
	return page, err
}

// pageRows asks for one row more than a page holds, to know whether there
// is more; 0 (no limit) stays 0.
func pageRows(limit int) int {
	if limit <= 0 {
		return 0
	}
	return limit + 1
}

// PageUnconfirmed pages child results and deliveries held in memory (the
// full scan's, with no index) by the rules of Unconfirmed: the same
// filters, order, page sizes and cursors.
func PageUnconfirmed(results []dedupe.ChildResult, deliveries []dedupe.Delivery, uq UnconfirmedQuery) (UnconfirmedPage, error) {
	var page UnconfirmedPage
	if err := uq.check(); err != nil {
		return page, err
	}
	cur, err := uq.cursor()
	if err != nil {
		return page, err
	}
	rs := append([]dedupe.ChildResult(nil), results...)
	SortChildResults(rs)
	ds := append([]dedupe.Delivery(nil), deliveries...)
	sort.Slice(ds, func(i, j int) bool {
		return lessStrings([]string{ds[i].MsgID, ds[i].ToThread}, []string{ds[j].MsgID, ds[j].ToThread})
	})
	var moreC, moreD bool
	for _, r := range rs {
		switch {
		case cur.CDone, uq.State != "" && r.State != uq.State, uq.Thread != "" && r.Parent != uq.Thread && r.Child != uq.Thread,
			cur.C != nil && !lessStrings(cur.C, []string{r.TaskMsgID, r.ResultMsgID, r.Parent, r.Child}):
			continue
		}
		if uq.Limit > 0 && len(page.ChildResults) == uq.Limit {
			moreC = true
			break
		}
		page.ChildResults = append(page.ChildResults, r)
	}
	for _, d := range ds {
		involved := uq.Thread == "" || d.FromThread == uq.Thread || d.ToThread == uq.Thread
		if d.State == dedupe.Confirmed && involved {
			page.Confirmed++
		}
		switch {
		case cur.DDone, !involved, uq.State == "" && d.State == dedupe.Confirmed, uq.State != "" && d.State != uq.State,
			cur.D != nil && !lessStrings(cur.D, []string{d.MsgID, d.ToThread}):
			continue
		}
		if uq.Limit > 0 && len(page.Deliveries) == uq.Limit {
			moreD = true
			continue
		}
		page.Deliveries = append(page.Deliveries, d)
	}
	uq.next(cur, &page, moreC, moreD)
	return page, nil
}

// SortChildResults orders child results as Unconfirmed lists them: by
// task, result, parent and child.
func SortChildResults(rs []dedupe.ChildResult) {
	sort.Slice(rs, func(i, j int) bool {
		return lessStrings([]string{rs[i].TaskMsgID, rs[i].ResultMsgID, rs[i].Parent, rs[i].Child},
			[]string{rs[j].TaskMsgID, rs[j].ResultMsgID, rs[j].Parent, rs[j].Child})
	})
}

// lessStrings orders string tuples as SQLite orders row values of text.
func lessStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// ResolveNode finds the thread a lineage command names: id, else the only
// thread whose id starts with it, among the threads that wrote a line and
// the children only a parent's thread_spawned names (as tree.Resolve over
// the tree's nodes).
func (q *queries) ResolveNode(ctx context.Context, id string) (string, error) {
	var found []string
	seen := map[string]bool{}
	for _, query := range []string{`SELECT thread_id FROM threads WHERE thread_id = ?1 OR (thread_id > ?1 AND thread_id < ?2) ORDER BY thread_id LIMIT 3`,
		`SELECT DISTINCT child_thread_id FROM edges WHERE evidence = 'thread_spawned' AND ordinal > 0
			AND (child_thread_id = ?1 OR (child_thread_id > ?1 AND child_thread_id < ?2)) ORDER BY child_thread_id LIMIT 3`} {
		rows, err := q.db.QueryContext(ctx, query, id, id+"\x7f")
		if err != nil {
			return "", err
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return "", err
			}
			if s == id {
				rows.Close()
				return id, nil
			}
			if !seen[s] {
				seen[s] = true
				found = append(found, s)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", err
		}
	}
	sort.Strings(found)
	switch {
	case id == "" || len(found) == 0:
		return "", fmt.Errorf("%w %s", ErrUnknownThread, id)
	case len(found) == 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%w: %s matches %s, %s and maybe more", ErrAmbiguousThread, id, found[0], found[1])
}
