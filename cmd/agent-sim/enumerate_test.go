package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/simcrash"
)

func enumCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestEnumerateOneSeed is make test's slice of the exhaustive mode: seed 1,
// every tree, every agent-side point at every position, and the mirror's torn append
// on the fork tree; no invariant broken, and the JSON report counts what
// ran. With -short (make test's race pass), three points of the fork tree.
func TestEnumerateOneSeed(t *testing.T) {
	var agentPoints []string
	for _, p := range simcrash.Points {
		if !strings.HasPrefix(p, "mirror_") {
			agentPoints = append(agentPoints, p)
		}
	}
	runs := []enumOptions{
		{Seeds: 1, SeedFrom: 1, Points: agentPoints, JSON: true},
		{Seeds: 1, SeedFrom: 1, Trees: []string{simcrash.TreeFork}, Points: []string{simcrash.PointMirrorTornWrite}, JSON: true},
	}
	if testing.Short() { // the race detector's pass: a few points of one tree
		runs[0].Trees = []string{simcrash.TreeFork}
		runs[0].Points = []string{simcrash.PointAfterEffect, simcrash.PointReceiptBeforeAck, simcrash.PointBetweenBarriers}
		runs = runs[:1]
	}
	for _, o := range runs {
		var out bytes.Buffer
		err := runEnumerate(enumCtx(t), o, &out)
		var rep simcrash.Report
		if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
			t.Fatalf("report: %v\n%s", jerr, out.String())
		}
		if err != nil {
			t.Fatalf("%v", err)
		}
		trees := o.Trees
		if trees == nil {
			trees = simcrash.Trees
		}
		if rep.Violations != 0 || rep.Clean != len(trees) || rep.Scenarios < 4*len(o.Points) {
			t.Errorf("points %v: %d scenarios, %d clean runs, %d violations", o.Points, rep.Scenarios, rep.Clean, rep.Violations)
		}
		for _, c := range rep.Cells {
			reachable := c.Point != simcrash.PointRevertAfterSeal || c.Tree == simcrash.TreeRevert
			if c.Point != "clean" && reachable && (c.Scenarios == 0 || c.Scenarios > c.Positions) {
				t.Errorf("%s %s: %d scenarios for %d positions", c.Tree, c.Point, c.Scenarios, c.Positions)
			}
		}
		t.Logf("%d scenarios and %d clean runs in %.1fs", rep.Scenarios, rep.Clean, rep.ElapsedSec)
	}
}

// TestEnumerateNamesTheFailingScenario: a violation (here a mutant: the
// world's probe lies, so an executed call is retried) is an error that
// names the scenario and how to run it again; --scenario runs it alone.
func TestEnumerateNamesTheFailingScenario(t *testing.T) {
	undo := simcrash.LieInProbes()
	defer undo()
	id := "tree/1/" + simcrash.PointAfterEffect + "/3"
	var out bytes.Buffer
	err := runEnumerate(enumCtx(t), enumOptions{Scenario: id, Parallel: 1, Procs: 2}, &out)
	if err == nil || !strings.Contains(err.Error(), id) || !strings.Contains(out.String(), "VIOLATION") || !strings.Contains(out.String(), "carried out 2 times") {
		t.Fatalf("err %v\n%s", err, out.String())
	}
	out.Reset()
	err = runEnumerate(enumCtx(t), enumOptions{Seeds: 1, SeedFrom: 1, Trees: []string{simcrash.TreeResend}, Points: []string{simcrash.PointAfterEffect}, Parallel: 4, Procs: 2}, &out)
	if err == nil || !strings.Contains(err.Error(), "enumerate --scenario resend/1/"+simcrash.PointAfterEffect+"/") {
		t.Fatalf("err %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "crash scenarios") || !strings.Contains(out.String(), "VIOLATION resend/1/") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestEnumerateBadInput: bad flags are usage errors (exit 2), one line.
func TestEnumerateBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"enumerate", "--trees", "oak"},
		{"enumerate", "--points", "nowhere"},
		{"enumerate", "--seeds", "0"},
		{"enumerate", "--scenario", "tree/1/after_effect/0"},
		{"enumerate", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(context.Background(), args, &stdout, &stderr)
		if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, stderr.String(), stdout.String())
		}
	}
	if !slices.Contains(simcrash.Points, simcrash.PointMirrorAfterAck) {
		t.Error("the mirror's point is not walked")
	}
}
