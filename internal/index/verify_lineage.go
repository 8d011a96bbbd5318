package index

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/tree"
)

// VerifyLineage checks the index's lineage and ledger against the full
// scan, the reference: in one snapshot of the index, the tree it assembles
// and the deliveries it judged must equal what tree.Build makes of the
// mirror files read up to the same watermarks (a serving coordinator may
// index on: the records past them are not compared). Each difference is a
// problem: lineage_differs (the tree: nodes, counts, statuses, orphans,
// problems) or ledger_differs (deliveries and child results).
func VerifyLineage(ctx context.Context, dir string) ([]IndexProblem, error) {
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var ros []Rollout
	var in tree.Input
	var confirmed int
	err = r.snapshot(ctx, func(q queryer) error {
		var err error
		if ros, err = rolloutsOf(ctx, q); err != nil {
			return err
		}
		if in, err = lineageOf(ctx, q, dir); err != nil {
			return err
		}
		return q.QueryRowContext(ctx, `SELECT count(*) FROM deliveries WHERE state = 'confirmed'`).Scan(&confirmed)
	})
	if err != nil {
		return nil, err
	}
	c := tree.NewCorpus()
	for _, ro := range ros {
		path := datadir.MirrorPath(dir, ro.ID)
		if path == "" || ro.WatermarkOffset == 0 {
			continue // VerifyIndex reports a missing file
		}
		f, err := rollout.OpenFile(path)
		if err != nil {
			return nil, err
		}
		upTo, err := rollout.NewJoined(f.Name(), rollout.Segment{Log: f, From: 0, To: ro.WatermarkOffset})
		if err != nil {
			return nil, err
		}
		if err := c.Add(upTo); err != nil {
			c.Problems = append(c.Problems, tree.Problem{Kind: "unreadable", Detail: err.Error()})
		}
	}
	scan := tree.Build(c, tree.Options{})
	indexed := tree.Assemble(in, tree.Options{})
	var problems []IndexProblem
	if d := firstDifference(indexed, scan); d != "" {
		problems = append(problems, IndexProblem{Kind: "lineage_differs", Detail: "the tree from the index differs from the full scan's: " + d})
	}
	scanConfirmed := 0
	var pending []dedupe.Delivery
	for _, d := range scan.Deliveries {
		if d.State == dedupe.Confirmed {
			scanConfirmed++
		} else {
			pending = append(pending, d)
		}
	}
	switch {
	case confirmed != scanConfirmed:
		problems = append(problems, IndexProblem{Kind: "ledger_differs",
			Detail: fmt.Sprintf("the index holds %d confirmed deliveries, the full scan finds %d", confirmed, scanConfirmed)})
	default:
		if d := firstDifference(in.Deliveries, pending); d != "" {
			problems = append(problems, IndexProblem{Kind: "ledger_differs", Detail: "the deliveries not confirmed differ: " + d})
		} else if d := firstDifference(in.ChildResults, scan.ChildResults); d != "" {
			problems = append(problems, IndexProblem{Kind: "ledger_differs", Detail: "the child results differ: " + d})
		}
	}
	return problems, nil
}

// firstDifference compares two values as JSON and shows where they first
// differ ("" when they do not).
func firstDifference(index, scan any) string {
	a, err := json.Marshal(index)
	if err != nil {
		return err.Error()
	}
	b, err := json.Marshal(scan)
	if err != nil {
		return err.Error()
	}
	if string(a) == string(b) {
		return ""
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return fmt.Sprintf("the index has …%s…, the full scan …%s…", a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
}
