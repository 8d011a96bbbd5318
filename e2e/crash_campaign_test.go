package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCrashCampaignShort runs a short `agent-sim crash` campaign (real
// processes: a coordinator with its embedded NATS, the world, three
// workers) over a fixed seed and a spread of faults: SIGKILL of a worker
// and of the coordinator at random moments and at named points, and a
// zombie worker. It must exit 0 with every invariant held in every round:
// nothing acknowledged lost, no side effect run twice, no call wrongly
// retried, deliveries, tree, replay and index <= mirror <= JetStream as
// the ground truth says, and the final whole-data-dir checks passed.
func TestCrashCampaignShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a crash campaign of real processes")
	}
	sim := agentSimBin(t)
	coord := coordinatorBin(t)
	const rounds = 10
	points := "worker-kill,worker-stop,coordinator-kill,worker:after_effect,worker:after_send_flush,worker:between_barriers,coordinator:mirror.after-ack,coordinator:index.mid-tx,coordinator:mirror.mid-append,worker:before_receipt"
	cmd := exec.Command(sim, "crash", "--seed", "42", "--rounds", "10", "--points", points, "--json",
		"--coordinator", coord, "--dir", t.TempDir(), "--round-timeout", "90s")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("%d rounds in %s\n%s", rounds, time.Since(start).Round(time.Second), lastLines(errb.String(), rounds+2))
	if err != nil {
		t.Fatalf("agent-sim crash: %v\n%s\n%s", err, lastLines(out.String(), 60), lastLines(errb.String(), 30))
	}
	var c struct {
		Seed   uint64 `json:"seed"`
		Rounds int    `json:"rounds"`
		Faults map[string]struct {
			Rounds     int `json:"rounds"`
			Killed     int `json:"killed"`
			NotReached int `json:"not_reached"`
		} `json:"faults"`
		Totals struct {
			Acked          int64          `json:"records_acknowledged"`
			Lost           int            `json:"records_lost"`
			SideEffects    int            `json:"side_effects"`
			ExecutedTwice  int            `json:"side_effects_executed_twice"`
			WronglyRetried int            `json:"calls_wrongly_retried"`
			Deliveries     map[string]int `json:"deliveries"`
			Want           map[string]int `json:"deliveries_ground_truth"`
		} `json:"totals"`
		TreeEqual  int               `json:"rounds_tree_equal"`
		FastNaive  int               `json:"rounds_fast_equals_naive"`
		Ordered    int               `json:"rounds_index_le_mirror_le_jetstream"`
		Final      []string          `json:"final_checks"`
		Violations []json.RawMessage `json:"violations"`
	}
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatalf("agent-sim crash --json: %v\n%s", err, out.String())
	}
	kills := 0
	for _, f := range c.Faults {
		kills += f.Killed
	}
	s := c.Totals
	switch {
	case c.Seed != 42 || c.Rounds != rounds || len(c.Violations) != 0:
		t.Fatalf("seed %d, %d rounds, violations %s", c.Seed, c.Rounds, c.Violations)
	case kills < rounds/2:
		t.Errorf("only %d of %d rounds injected their fault: %+v", kills, rounds, c.Faults)
	case s.Acked == 0 || s.SideEffects == 0 || s.Lost != 0 || s.ExecutedTwice != 0 || s.WronglyRetried != 0:
		t.Errorf("totals %+v", s)
	case s.Deliveries["confirmed"] == 0 || s.Deliveries["confirmed"] != s.Want["confirmed"] || len(s.Deliveries) != 1:
		t.Errorf("deliveries %v, ground truth %v", s.Deliveries, s.Want)
	case c.TreeEqual != rounds || c.FastNaive != rounds || c.Ordered != rounds:
		t.Errorf("rounds with the tree equal %d, fast == naive %d, index <= mirror <= JetStream %d, of %d", c.TreeEqual, c.FastNaive, c.Ordered, rounds)
	case len(c.Final) != 3 || !strings.Contains(strings.Join(c.Final, "\n"), "verify --data: ok"):
		t.Errorf("final checks %q", c.Final)
	}
}
