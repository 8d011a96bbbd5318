package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
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
	const rounds = 10
	points := "worker-kill,worker-stop,coordinator-kill,worker:after_effect,worker:after_send_flush,worker:between_barriers,coordinator:mirror.after-ack,coordinator:index.mid-tx,coordinator:mirror.mid-append,worker:before_receipt"
	c := runCampaign(t, "--seed", "42", "--rounds", "10", "--points", points)
	if c.Bus != "embedded" {
		t.Errorf("bus %q, want embedded", c.Bus)
	}
	kills := 0
	for _, f := range c.Faults {
		kills += f.Killed
	}
	s := c.Totals
	switch {
	case c.Seed != 42 || c.Rounds != rounds:
		t.Fatalf("seed %d, %d rounds", c.Seed, c.Rounds)
	case kills < rounds/2:
		t.Errorf("only %d of %d rounds injected their fault: %+v", kills, rounds, c.Faults)
	case s.Acked == 0 || s.SideEffects == 0 || s.Lost != 0 || s.ExecutedTwice != 0 || s.WronglyRetried != 0:
		t.Errorf("totals %+v", s)
	case s.Deliveries["confirmed"] == 0 || !sameCounts(s.Deliveries, s.Want):
		t.Errorf("deliveries %v, ground truth %v", s.Deliveries, s.Want)
	case c.TreeEqual != rounds || c.FastNaive != rounds || c.Ordered != rounds:
		t.Errorf("rounds with the tree equal %d, fast == naive %d, index <= mirror <= JetStream %d, of %d", c.TreeEqual, c.FastNaive, c.Ordered, rounds)
	}
}

// TestCrashCampaignDiskAndLeaseFaults: the mirror's disk failing a write
// (ENOSPC, EIO) or an fsync (EIO) under a serving coordinator that is not
// restarted after it, and a worker killed mid lease renewal: every fault
// reached, every invariant held.
func TestCrashCampaignDiskAndLeaseFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("a crash campaign of real processes")
	}
	c := runCampaign(t, "--seed", "44", "--rounds", "4", "--points", "disk:write-enospc,disk:write-eio,disk:sync-eio,worker:lease_renewal")
	kills := 0
	for name, f := range c.Faults {
		kills += f.Killed
		if strings.HasPrefix(name, "disk:") && f.Killed != f.Rounds {
			t.Errorf("%s: %d of %d rounds reached", name, f.Killed, f.Rounds)
		}
	}
	s := c.Totals
	if c.Rounds != 4 || kills < 3 || s.Lost != 0 || s.ExecutedTwice != 0 || c.TreeEqual != 4 || c.Ordered != 4 || !sameCounts(s.Deliveries, s.Want) {
		t.Errorf("%d rounds, %d faults injected (%+v), totals %+v, tree equal in %d, ordered in %d", c.Rounds, kills, c.Faults, s, c.TreeEqual, c.Ordered)
	}
}

// TestCrashCampaignOnExternalBus: the campaign against a NATS server it
// did not start (--nats): coordinator kills leave the bus up, and every
// invariant holds.
func TestCrashCampaignOnExternalBus(t *testing.T) {
	if testing.Short() {
		t.Skip("a crash campaign of real processes")
	}
	ns, err := stream.StartServer(stream.ServerConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	c := runCampaign(t, "--seed", "43", "--rounds", "3", "--points", "coordinator-kill,worker-kill,coordinator:mirror.after-ack", "--nats", ns.ClientURL())
	if c.Bus != ns.ClientURL() || c.Rounds != 3 || c.Totals.Lost != 0 || c.TreeEqual != 3 {
		t.Errorf("bus %q, %d rounds, totals %+v, tree equal in %d", c.Bus, c.Rounds, c.Totals, c.TreeEqual)
	}
}

// TestCrashCampaignOnOwnCluster: the campaign with a three-node cluster of
// its own (--cluster 3: agent-sim nats-node child processes, streams with
// three replicas) SIGKILLs whichever node leads ROLLOUTS in the middle of
// a tree and starts it again after a lease TTL; with coordinator and
// worker kills beside it, every invariant holds, against a bus that is the
// campaign's alone (deliveries confirmed counted exactly).
func TestCrashCampaignOnOwnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a crash campaign of real processes and a 3-node cluster")
	}
	c := runCampaign(t, "--seed", "45", "--rounds", "3", "--cluster", "3", "--points", "nats-leader-kill,coordinator-kill,worker-kill")
	lk := c.Faults["nats-leader-kill"]
	if c.Rounds != 3 || lk.Rounds == 0 || lk.Killed != lk.Rounds || c.Totals.Lost != 0 || c.Totals.ExecutedTwice != 0 || c.TreeEqual != 3 || c.Ordered != 3 {
		t.Errorf("%d rounds, faults %+v, totals %+v, tree equal in %d, ordered in %d", c.Rounds, c.Faults, c.Totals, c.TreeEqual, c.Ordered)
	}
	if !strings.Contains(c.Bus, "cluster of 3") {
		t.Errorf("bus %q, want the campaign's cluster", c.Bus)
	}
	for _, r := range c.Detail {
		if r.Point == "nats-leader-kill" && (r.Outcome != "killed" || !strings.HasPrefix(r.Died, "n")) {
			t.Errorf("round %d: the leader kill %s, took down %q; want a node killed", r.Round, r.Outcome, r.Died)
		}
	}
}

// sameCounts: equal maps of counts, a missing key counting 0.
func sameCounts(a, b map[string]int) bool {
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	for k, n := range b {
		if a[k] != n {
			return false
		}
	}
	return true
}

type campaignJSON struct {
	Seed   uint64 `json:"seed"`
	Rounds int    `json:"rounds"`
	Bus    string `json:"bus"`
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
	Detail     []struct {
		Round   int    `json:"round"`
		Point   string `json:"point"`
		Outcome string `json:"outcome"`
		Died    string `json:"died"`
	} `json:"round_detail"`
}

// runCampaign runs agent-sim crash --json with args; it must exit 0 with no
// violation and its three final checks passed.
func runCampaign(t *testing.T, args ...string) campaignJSON {
	t.Helper()
	cmd := exec.Command(agentSimBin(t), append([]string{"crash", "--json", "--coordinator", coordinatorBin(t), "--dir", t.TempDir(), "--round-timeout", "90s"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("agent-sim crash %s: %s\n%s", strings.Join(args, " "), time.Since(start).Round(time.Second), lastLines(errb.String(), 12))
	if err != nil {
		t.Fatalf("agent-sim crash: %v\n%s\n%s", err, lastLines(out.String(), 60), lastLines(errb.String(), 30))
	}
	var c campaignJSON
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatalf("agent-sim crash --json: %v\n%s", err, out.String())
	}
	if len(c.Violations) != 0 || len(c.Final) != 3 || !strings.Contains(strings.Join(c.Final, "\n"), "verify --data: ok") {
		t.Fatalf("violations %s, final checks %q", c.Violations, c.Final)
	}
	return c
}

// TestCrashCampaignInterrupted: SIGTERM in the middle of a campaign stops
// it, its child processes with it, and it says it was interrupted (exit 1,
// the directory kept), not that a round's tree failed.
func TestCrashCampaignInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("a crash campaign of real processes")
	}
	dir := t.TempDir()
	cmd := exec.Command(agentSimBin(t), "crash", "--coordinator", coordinatorBin(t), "--dir", dir, "--seed", "46", "--rounds", "50", "--points", "worker-kill")
	var errb syncBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !poll(120*time.Second, func() bool { return strings.Contains(errb.String(), "round 1/50") }) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the campaign never finished a round:\n%s", errb.String())
	}
	time.Sleep(500 * time.Millisecond) // into round 2
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, errb.String())
	}
	out := errb.String()
	if !strings.Contains(out, "interrupted in round") || strings.Contains(out, "did not complete") || !strings.Contains(out, "its directory is kept: "+dir) {
		t.Errorf("stderr:\n%s", lastLines(out, 10))
	}
	// Nothing the campaign started is left running.
	b, _ := exec.Command("pgrep", "-f", dir).Output()
	if s := strings.TrimSpace(string(b)); s != "" {
		t.Errorf("processes of the campaign still running: %s", s)
	}
}
