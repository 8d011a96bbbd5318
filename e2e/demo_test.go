package e2e

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDemoTellsTheSameStory runs `make run`'s script twice: both runs pass,
// print the same lines (once ports, paths and the data dir's name are
// masked), neither is silent for more than a few seconds, and the story has
// its parts: the imported tree, and the live tree (a root, two children, a
// grandchild) broken by a worker SIGKILLed after a side effect, then
// recovered, with the call reconciled and executed once.
func TestDemoTellsTheSameStory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo twice")
	}
	bin := coordinatorBin(t)
	var runs [2][]string
	for i := range runs {
		runs[i] = runDemo(t, bin)
	}
	if len(runs[0]) != len(runs[1]) {
		t.Fatalf("the demo printed %d lines, then %d:\n%s\n---\n%s", len(runs[0]), len(runs[1]),
			strings.Join(runs[0], "\n"), strings.Join(runs[1], "\n"))
	}
	for i := range runs[0] {
		if runs[0][i] != runs[1][i] {
			t.Fatalf("the demo's line %d differs between runs:\n%s\n%s", i+1, runs[0][i], runs[1][i])
		}
	}
	story := strings.Join(runs[0], "\n")
	for _, want := range []string{"torn tail repaired", "4,785 records byte-equal", "Re-sent 01JDREL0TASKC000000000000C",
		"Nothing was executed twice", "w1 was SIGKILLed after a side effect", "executed twice: 0; re-run by an agent: 0",
		// the live tree while broken, then after recovery
		"├─ R-0  needs_attention  (role sim; 1 interrupted turn; 1 call unknown)", "R        R-0    …     -       no_result",
		"…     interrupted  -       yes", "…     apply  R-0-t3", "for the deploy's key R-0-t3: executed 1 time(s), asked 1 time(s)",
		"├─ R-0  idle  (role sim)", "unconfirmed child results and deliveries in the live tree: 0",
		"…     aborted      stale_after_crash  yes", "Dangling calls: none",
		"the call apply (key R-0-t3): outcome executed, by probe:world", "executed 1 time(s), asked 1 time(s) (deployed once)",
		"rollouts   X/rollouts/"} {
		if !strings.Contains(story, want) {
			t.Errorf("the demo never says %q", want)
		}
	}
}

var demoMask = regexp.MustCompile(`127\.0\.0\.1:[0-9]+|/[^ ]*logbook-run\.[A-Za-z0-9]+`)

// runDemo runs scripts/run.sh with bin and returns its masked stdout lines
// (stderr carries progress, which varies with the machine's load); it fails
// the test when the script fails or neither stream says anything for 8 s.
func runDemo(t *testing.T, bin string) []string {
	t.Helper()
	cmd := exec.Command("bash", "../scripts/run.sh")
	cmd.Env = append(cmd.Environ(), "LOGBOOK_COORDINATOR="+bin, "LOGBOOK_AGENT_SIM="+agentSimBin(t))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type line struct {
		out  bool
		text string
	}
	lines := make(chan line)
	var wg sync.WaitGroup
	for _, r := range []struct {
		out bool
		rd  io.Reader
	}{{true, stdout}, {false, stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(r.rd)
			for sc.Scan() {
				lines <- line{r.out, sc.Text()}
			}
		}()
	}
	go func() { wg.Wait(); close(lines) }()
	var out, all []string
	last, worst := time.Now(), time.Duration(0)
	for l := range lines {
		worst = max(worst, time.Since(last))
		last = time.Now()
		all = append(all, l.text)
		if l.out {
			out = append(out, demoMask.ReplaceAllString(l.text, "X"))
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the demo failed: %v\n%s", err, strings.Join(all, "\n"))
	}
	if worst > 8*time.Second {
		t.Errorf("the demo was silent for %v", worst.Round(time.Millisecond))
	}
	return out
}
