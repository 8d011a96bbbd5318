package index

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/logbook-agents/logbook/internal/datadir"
)

// IndexProblem is one difference between the index and its mirror.
type IndexProblem struct {
	Rollout string `json:"rollout_id,omitempty"`
	// Kind: no_mirror_file, index_ahead (the watermark is past the mirror's
	// last record), mirror_unreadable, rows_differ.
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// IndexReport is what VerifyIndex found.
type IndexReport struct {
	// Rollouts are the indexed rollouts, with their watermarks, as of the
	// snapshot that was checked.
	Rollouts []Rollout      `json:"rollouts"`
	Problems []IndexProblem `json:"problems"`
}

// maxRowDiffs bounds the row differences reported per table.
const maxRowDiffs = 20

// VerifyIndex checks the index of data dir dir against its mirror files:
// every indexed rollout has a mirror file that holds its watermark, and the
// index's rows equal a fresh projection of the mirror up to each watermark.
// It only reads the data dir: the index is read in one snapshot (a serving
// coordinator may keep writing it) and the fresh projection is built in a
// temporary directory.
func VerifyIndex(ctx context.Context, dir string) (IndexReport, error) {
	rep := IndexReport{Problems: []IndexProblem{}}
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		return rep, err
	}
	defer r.Close()
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return rep, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return rep, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	if rep.Rollouts, err = rolloutsOf(ctx, conn); err != nil {
		return rep, err
	}

	tmp, err := os.MkdirTemp("", "logbook-verify-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(tmp)
	fresh, err := OpenFile(ctx, filepath.Join(tmp, datadir.Index), Options{})
	if err != nil {
		return rep, err
	}
	defer fresh.Close()
	fresh.dir, fresh.mirror, fresh.deferJudge = dir, dir, true
	for _, ro := range rep.Rollouts {
		path := datadir.MirrorPath(dir, ro.ID)
		if path == "" {
			rep.Problems = append(rep.Problems, IndexProblem{Rollout: ro.ID, Kind: "no_mirror_file",
				Detail: fmt.Sprintf("indexed to %s %d, but %s has no file for it", unitOf(ro.Lines), ro.WatermarkOrdinal, datadir.RolloutsDir(dir))})
			continue
		}
		if _, _, err := fresh.catchUpFile(ctx, ro.ID, path, ro.WatermarkOrdinal, nil); err != nil {
			rep.Problems = append(rep.Problems, IndexProblem{Rollout: ro.ID, Kind: "mirror_unreadable", Detail: oneLine(err.Error())})
		}
		got, _, err := fresh.Rollout(ctx, ro.ID)
		if err != nil {
			return rep, err
		}
		if got.WatermarkOrdinal < ro.WatermarkOrdinal {
			rep.Problems = append(rep.Problems, IndexProblem{Rollout: ro.ID, Kind: "index_ahead",
				Detail: fmt.Sprintf("the index holds %s %d, the mirror file %s only %d", unitOf(ro.Lines), ro.WatermarkOrdinal, path, got.WatermarkOrdinal)})
		}
	}
	if err := fresh.judgeAll(ctx); err != nil {
		return rep, err
	}
	// Rows of rollouts with a problem already reported would only repeat it.
	skip := map[string]bool{}
	for _, p := range rep.Problems {
		skip[p.Rollout] = true
		for _, ro := range rep.Rollouts {
			if ro.ID == p.Rollout && ro.ThreadID != "" {
				skip[ro.ThreadID] = true
			}
		}
	}
	diffs, err := diffIndexes(ctx, conn, fresh.db, skip)
	if err != nil {
		return rep, err
	}
	for _, d := range diffs {
		rep.Problems = append(rep.Problems, IndexProblem{Kind: "rows_differ", Detail: d})
	}
	return rep, nil
}

func unitOf(lines bool) string {
	if lines {
		return "line"
	}
	return "ordinal"
}

// DiffFiles compares the rows of two index files (threads.seq aside) and
// returns the differences, at most maxRowDiffs per table.
func DiffFiles(ctx context.Context, a, b string) ([]string, error) {
	ra, err := OpenReader(ctx, a)
	if err != nil {
		return nil, err
	}
	defer ra.Close()
	rb, err := OpenReader(ctx, b)
	if err != nil {
		return nil, err
	}
	defer rb.Close()
	return diffIndexes(ctx, ra.db, rb.db, nil)
}

// diffIndexes merges the ordered rows of each compared table of the index
// (a) and of the fresh projection (b), leaving out the rows whose first key
// (a rollout or thread id) is in skip.
func diffIndexes(ctx context.Context, a, b queryer, skip map[string]bool) ([]string, error) {
	var out []string
	for _, t := range comparedTables {
		q := "SELECT " + t.cols + " FROM " + t.name + " ORDER BY " + t.order
		ra, err := dumpRows(ctx, a, q, skip)
		if err != nil {
			return nil, err
		}
		rb, err := dumpRows(ctx, b, q, skip)
		if err != nil {
			return nil, err
		}
		keys := len(strings.Split(t.order, ","))
		n := 0
		add := func(s string) {
			if n < maxRowDiffs {
				out = append(out, t.name+": "+s)
			} else if n == maxRowDiffs {
				out = append(out, t.name+": more differences not listed")
			}
			n++
		}
		i, j := 0, 0
		for i < len(ra) || j < len(rb) {
			var c int
			switch {
			case i == len(ra):
				c = 1
			case j == len(rb):
				c = -1
			default:
				c = compareKeys(ra[i][:keys], rb[j][:keys])
			}
			switch {
			case c < 0:
				add(fmt.Sprintf("row %s is in the index, not in the mirror's projection", rowString(ra[i])))
				i++
			case c > 0:
				add(fmt.Sprintf("row %s of the mirror's projection is not in the index", rowString(rb[j])))
				j++
			default:
				if rowString(ra[i]) != rowString(rb[j]) {
					add(fmt.Sprintf("row %s in the index is %s in the mirror's projection", rowString(ra[i]), rowString(rb[j])))
				}
				i++
				j++
			}
		}
	}
	return out, nil
}

// compareKeys orders keys as SQLite did: integers as numbers, text as bytes.
func compareKeys(a, b []string) int {
	for k := range a {
		if a[k] == b[k] {
			continue
		}
		x, errx := strconv.ParseInt(a[k], 10, 64)
		y, erry := strconv.ParseInt(b[k], 10, 64)
		if errx == nil && erry == nil {
			if x < y {
				return -1
			}
			return 1
		}
		return strings.Compare(a[k], b[k])
	}
	return 0
}

func rowString(r []string) string { return "(" + strings.Join(r, ", ") + ")" }

func dumpRows(ctx context.Context, q queryer, query string, skip map[string]bool) ([][]string, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		if skip[string(vals[0])] {
			continue
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = string(v)
		}
		out = append(out, row)
	}
	return out, rows.Err()
}
