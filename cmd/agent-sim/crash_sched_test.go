package main

import (
	"reflect"
	"strings"
	"testing"
)

// TestScheduleIsTheSeeds: a seed always draws the same faults, hits,
// delays, victims and trees (the run nonce aside); another seed draws
// another sequence; every fault comes once per len(points) rounds.
func TestScheduleIsTheSeeds(t *testing.T) {
	points := allFaults(false)
	a := schedule(7, 3*len(points), points, 3, "a")
	b := schedule(7, 3*len(points), points, 3, "b")
	for i := range a {
		b[i].Tree.Run = a[i].Tree.Run
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed drew two schedules")
	}
	if c := schedule(8, len(a), points, 3, "a"); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 drew the same schedule")
	}
	for block := 0; block < 3; block++ {
		seen := map[string]bool{}
		for _, f := range a[block*len(points) : (block+1)*len(points)] {
			seen[f.Point] = true
			if f.Victim < 0 || f.Victim > 2 || f.Tree.Agents < 2 || f.Tree.Turn < 1 {
				t.Errorf("round %d: %+v", f.Round, f)
			}
			if strings.Contains(f.Point, ":") != (f.Hit > 0) || strings.Contains(f.Point, ":") == (f.Delay > 0) {
				t.Errorf("round %d %s: hit %d delay %s", f.Round, f.Point, f.Hit, f.Delay)
			}
		}
		if len(seen) != len(points) {
			t.Errorf("block %d drew %d of %d faults", block, len(seen), len(points))
		}
	}
}

func TestParsePoints(t *testing.T) {
	all := allFaults(false)
	for spec, want := range map[string]int{"": len(all), "all": len(all), "worker:*": len(crashPoints),
		"coordinator:*": len(coordinatorPoints), "disk:*": len(diskFaults), "worker-kill,worker-kill,coordinator-kill": 2} {
		got, err := parsePoints(spec, false)
		if err != nil || len(got) != want {
			t.Errorf("parsePoints(%q) = %v, %v; want %d faults", spec, got, err, want)
		}
	}
	for _, bad := range []string{"worker:nope", "kill", "disk:nope", "net:*"} {
		if _, err := parsePoints(bad, false); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("parsePoints(%q): %v, want an error naming it", bad, err)
		}
	}
	// The leader kill only with a cluster of the campaign's own.
	if _, err := parsePoints(natsLeaderKill, false); err == nil || !strings.Contains(err.Error(), "--cluster") {
		t.Errorf("nats-leader-kill without --cluster: %v, want an error naming --cluster", err)
	}
	if got, err := parsePoints("all", true); err != nil || len(got) != len(all)+1 || got[len(got)-1] != natsLeaderKill {
		t.Errorf("all with a cluster: %v, %v; want every fault and %s", got, err, natsLeaderKill)
	}
	if got, err := parsePoints(natsLeaderKill+",worker-kill", true); err != nil || len(got) != 2 {
		t.Errorf("nats-leader-kill,worker-kill with a cluster: %v, %v", got, err)
	}
}

func TestParseCrashFlag(t *testing.T) {
	if p, n, err := parseCrashFlag("after_effect:3"); p != "after_effect" || n != 3 || err != nil {
		t.Errorf("after_effect:3: %q %d %v", p, n, err)
	}
	if p, n, err := parseCrashFlag("before_receipt"); p != "before_receipt" || n != 1 || err != nil {
		t.Errorf("before_receipt: %q %d %v", p, n, err)
	}
	for _, bad := range []string{"nope", "after_effect:0", "after_effect:x"} {
		if _, _, err := parseCrashFlag(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
