package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentTreeWithAgentCredentials: a serving coordinator with --auth, and
// every simulated process on least-privilege credentials made by
// `coordinator credentials new`: the world an agent that may only serve its
// application subjects, the workers and the run agents that may only call
// them. The tree completes as without authentication (leases, mailboxes,
// offers, heartbeats, thread records through the coordinator), equals the
// ground truth, and a stranger is refused.
func TestAgentTreeWithAgentCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	cred := func(name string, scope ...string) string {
		out := filepath.Join(dir, name+".nk")
		args := append([]string{"credentials", "new", "--role", "agent", "--name", name, "--auth", users, "--out", out}, scope...)
		runCoordinator(t, coordinatorBin(t), args...)
		return out
	}
	world := cred("world", "--subscribe", "sim.world.>")
	agents := cred("agents", "--publish", "sim.world.>")
	b := startSimBusWith(t, "3s", []string{"--auth", users}, []string{"--nkey", world}, "--nkey", agents)
	for i := range 2 {
		b.worker(t, fmt.Sprintf("w%d", i))
	}
	s := b.run(t, "--seed", "12", "--agents", "8", "--depth", "2", "--turns", "2")
	if s.Threads != s.Planned || s.ExecutedTwice != 0 || s.Rerequested != 0 {
		t.Fatalf("summary %+v", s)
	}
	b.checkAgainstTruth(t, s)
	for _, c := range []*child{b.serve, b.world} {
		if strings.Contains(c.stderr.String(), "Violation") {
			t.Errorf("a permission violation:\n%s", lastLines(c.stderr.String(), 20))
		}
	}
	cmd := exec.Command(agentSimBin(t), "run", "--nats", b.url, "--json", "--timeout", "10s", "--seed", "1", "--agents", "1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(out)), "authorization") {
		t.Errorf("a run without credentials: %v\n%s", err, out)
	}
}
