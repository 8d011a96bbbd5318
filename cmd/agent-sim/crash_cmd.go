package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/dedupe"
)

type crashFlags struct {
	seed         uint64
	rounds       int
	points       string
	natsURL      string
	cluster      int
	asJSON       bool
	workers      int
	leaseTTL     time.Duration
	roundTimeout time.Duration
	dir          string
	keep         bool
	coordinator  string
}

func newCrashCmd() *cobra.Command {
	var f crashFlags
	var enum enumOptions
	var exhaustive bool
	cmd := &cobra.Command{
		Use:   "crash --seed S --rounds R [--points LIST] [--nats URL] [--json] | crash --enumerate [--seeds N]",
		Short: "Crash-test Logbook: kill workers and the coordinator under live agent trees, check every invariant",
		Long: `crash runs a crash campaign. It starts a coordinator (coordinator serve,
found next to agent-sim or on PATH; with its embedded NATS on a port the OS
picks, or against --nats URL), the world and --workers workers, all as child
processes, and then R rounds. Every round runs a seeded tree of simulated
agents (agent-sim run's trees: turns, keyed side effects, spawns, mail,
compactions, rollbacks) while injecting ONE fault:

  worker-kill            SIGKILL of a worker at a random moment
  worker-stop            SIGSTOP of a worker past the lease TTL, then SIGCONT (a zombie)
  coordinator-kill       SIGKILL of the coordinator at a random moment (the embedded
                         NATS dies with it; every client reconnects after the restart)
  worker:POINT           a worker restarted with --crash POINT:N dies at its Nth hit:
                         before_effect, after_effect, between_barriers, after_spawn,
                         after_send_flush, before_receipt, lease_renewal
  coordinator:POINT      the coordinator restarted with LOGBOOK_CRASH=POINT:N dies there:
                         mirror.after-ack, mirror.mid-append, mirror.before-watermark,
                         mirror.zst-before-rename, mirror.zst-after-rename,
                         mirror.unzst-after-rename, index.mid-tx
  disk:FAULT             the coordinator restarted with the Nth write or fsync of a mirror
                         file failing once: write-enospc, write-eio, sync-eio; it is not
                         restarted after it, so its mirror must recover alone (the KILLS
                         column counts these faults injected)

Whatever dies is restarted; the round waits until the tree completes and then
checks DESIGN §8's invariants against ground truth kept outside the system:
the world's ledger (no side effect requested or executed twice), the workers'
own --acks records (no acknowledged record lost: JetStream holds each
acknowledged ordinal under the epoch that wrote it), the mirror byte-equal to
JetStream and the index no further than the mirror, every call found in
flight reported unknown and reconciled by the world's probe and none retried
without a probe proving it did not run, every delivery's state against the
plan (a task to and a result from every thread, each confirmed), the tree
rebuilt from the mirror equal to the plan, and fast replay equal to naive
replay for every rollout. At the end: coordinator verify --data, and the
whole data dir's tree and deliveries against every round's plan.

The schedule (which fault, its hit or delay, its victim, the tree) is drawn
from --seed before anything runs: the same seed gives the same sequence.
--points narrows it (comma-separated names, worker:*, coordinator:* or disk:*).

It prints a table (faults with their kills; the invariants with what was
found against ground truth); --json prints the same as data with every
round's detail. On a violation it stops, prints the seed, the round and the
fault, keeps its directory (logs/ has every child's output) and exits 1.`,
		Example: `  agent-sim crash --seed 7 --rounds 50
  agent-sim crash --seed 7 --rounds 20 --points worker:after_effect,coordinator-kill --json
  agent-sim crash --seed 7 --rounds 100 --nats nats://127.0.0.1:4222   # a bus you run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if exhaustive {
				return runEnumerateFrom(cmd, f, enum)
			}
			if f.rounds < 1 || f.workers < 2 {
				return usageError{errors.New("--rounds must be at least 1 and --workers at least 2")}
			}
			if f.leaseTTL < time.Second {
				return usageError{fmt.Errorf("--lease-ttl %s: want 1s or more", f.leaseTTL)}
			}
			if f.cluster != 0 && (f.cluster < 3 || f.natsURL != "") {
				return usageError{fmt.Errorf("--cluster %d: want 3 or more nodes, and not with --nats (a bus you run cannot be killed by the campaign)", f.cluster)}
			}
			points, err := parsePoints(f.points, f.cluster > 0)
			if err != nil {
				return usageError{err}
			}
			if !cmd.Flags().Changed("seed") {
				f.seed = uint64(time.Now().UnixNano() % 1_000_000_000)
			}
			return runCrash(cmd.Context(), f, points, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&f.seed, "seed", 0, "the campaign's seed (default: from the clock, printed)")
	fl.IntVar(&f.rounds, "rounds", 20, "rounds: one tree and one fault each")
	fl.StringVar(&f.points, "points", "all", "the faults to draw from: comma-separated `LIST` of names, worker:*, coordinator:* or all")
	fl.StringVar(&f.natsURL, "nats", "", "run against this NATS `URL` (a server or cluster you run) instead of the coordinator's embedded one")
	fl.IntVar(&f.cluster, "cluster", 0, "run against a JetStream cluster of `N` nodes the campaign starts (agent-sim nats-node), streams with 3 replicas; adds the fault nats-leader-kill")
	fl.BoolVar(&f.asJSON, "json", false, "print the campaign as JSON, with every round's detail")
	fl.IntVar(&f.workers, "workers", 3, "worker processes")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 2*time.Second, "the coordinator's lease and heartbeat TTL (a fresh bus only)")
	fl.DurationVar(&f.roundTimeout, "round-timeout", 3*time.Minute, "a round whose tree has not completed by then fails")
	fl.StringVar(&f.dir, "dir", "", "work in `DIR` (data dir, ledger, acks, logs; default a new temporary directory)")
	fl.BoolVar(&f.keep, "keep", false, "keep the directory after a clean campaign too")
	fl.StringVar(&f.coordinator, "coordinator", "", "the coordinator binary (default: next to agent-sim, else on PATH)")
	fl.BoolVar(&exhaustive, "enumerate", false, "exhaustive mode: every crash point at every position of small scripted trees, in one process (see docs/RELIABILITY.md); takes --points, --json, --dir and the flags below")
	fl.IntVar(&enum.Seeds, "seeds", 1, "--enumerate: how many seeds each tree is scripted with")
	fl.Uint64Var(&enum.SeedFrom, "seed-from", 1, "--enumerate: the first seed")
	fl.IntVar(&enum.MirrorSeeds, "mirror-seeds", 0, "--enumerate: walk the mirror's crash points for the first N seeds only (0: all)")
	fl.StringSliceVar(&enum.Trees, "trees", nil, "--enumerate: trees to walk (default all)")
	fl.IntVar(&enum.Parallel, "parallel", 16, "--enumerate: scenarios run at once")
	fl.IntVar(&enum.Procs, "procs", 8, "--enumerate: GOMAXPROCS while running")
	fl.StringVar(&enum.Scenario, "scenario", "", "--enumerate: run only this scenario `ID` (tree/seed/point/position, as a violation prints it)")
	return cmd
}

// runEnumerateFrom runs crash --enumerate: the campaign flags it shares
// (--points, --json, --dir) mean the same there; the others do not apply.
func runEnumerateFrom(cmd *cobra.Command, f crashFlags, o enumOptions) error {
	for _, name := range []string{"seed", "rounds", "nats", "workers", "lease-ttl", "round-timeout", "keep", "coordinator"} {
		if cmd.Flags().Changed(name) {
			return usageError{fmt.Errorf("--%s is for the process campaign, not --enumerate", name)}
		}
	}
	if f.points != "all" {
		o.Points = strings.Split(f.points, ",")
	}
	o.JSON, o.Dir = f.asJSON, f.dir
	if err := o.check(); err != nil {
		return err
	}
	return runEnumerate(cmd.Context(), o, cmd.OutOrStdout())
}

func runCrash(ctx context.Context, f crashFlags, points []string, stdout, stderr io.Writer) error {
	start := time.Now()
	coord := f.coordinator
	var err error
	if coord == "" {
		if coord, err = findCoordinator(); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir := f.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "agent-sim-crash-"); err != nil {
			return err
		}
	}
	run := strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36), 36)
	plan := schedule(f.seed, f.rounds, points, f.workers, run)
	c := &campaign{Seed: f.seed, Planned: f.rounds, Dir: dir, Workers: f.workers, LeaseTTL: f.leaseTTL.String(), Bus: "embedded",
		Faults: map[string]*faultTally{}, Totals: checkStats{Deliveries: map[string]int{}, WantDeliveries: map[string]int{}}, Final: []string{}, Violations: []violation{}}
	switch {
	case f.natsURL != "":
		c.Bus = f.natsURL
	case f.cluster > 0:
		c.Bus = fmt.Sprintf("a cluster of %d nats-node processes, 3 replicas", f.cluster)
	}
	fmt.Fprintf(stderr, "agent-sim crash: seed %d, %d rounds over %d faults, %d workers, in %s\n", f.seed, f.rounds, len(points), f.workers, dir)
	r, err := startRig(ctx, rigConfig{dir: dir, coordinator: coord, self: self, natsURL: f.natsURL, cluster: f.cluster, workers: f.workers, leaseTTL: f.leaseTTL})
	if err != nil {
		return fmt.Errorf("seed %d: start: %w (see %s/logs)", f.seed, err, dir)
	}
	var failure error
	want := map[string]string{}
	for _, ft := range plan {
		if ctx.Err() != nil {
			failure = fmt.Errorf("seed %d: interrupted in round %d (%s) after %d rounds: %w", f.seed, ft.Round, ft, c.Rounds, ctx.Err())
			break
		}
		res, err := runRound(ctx, r, ft, f.roundTimeout)
		if err != nil && ctx.Err() != nil { // stopped (SIGINT, SIGTERM): not a finding
			failure = fmt.Errorf("seed %d: interrupted in round %d (%s) after %d rounds: %w", f.seed, ft.Round, ft, c.Rounds, ctx.Err())
			break
		}
		if err != nil {
			failure = fmt.Errorf("seed %d, round %d, fault %s: %w (rerun: agent-sim crash --seed %d --rounds %d --points %s)",
				f.seed, ft.Round, ft, err, f.seed, ft.Round, strings.Join(points, ","))
			c.Violations = append(c.Violations, violation{Round: ft.Round, Point: ft.Point, Fault: ft.String(), Problems: []string{err.Error()}})
			break
		}
		c.add(res)
		if f.asJSON {
			c.Detail = append(c.Detail, res)
		}
		pl := buildPlan(ft.Tree)
		want["run-"+pl.root] = ""
		for _, th := range pl.threads() {
			want[th] = pl.parent(th, "run-"+pl.root)
		}
		c.ElapsedSec = time.Since(start).Seconds()
		c.writeProgress(dir)
		status := "ok"
		if len(res.Violations) > 0 {
			status = fmt.Sprintf("%d VIOLATIONS", len(res.Violations))
		}
		outcome := res.Outcome
		if res.Died != "" {
			outcome += " (" + res.Died + ")"
		}
		fmt.Fprintf(stderr, "round %d/%d %s: %s, %d threads, %s in %.1fs\n", ft.Round, f.rounds, ft, outcome, res.Threads, status, res.ElapsedSec)
		if len(res.Violations) > 0 {
			failure = fmt.Errorf("seed %d, round %d, fault %s: %d invariant violations (rerun: agent-sim crash --seed %d --rounds %d --points %s)",
				f.seed, ft.Round, ft, len(res.Violations), f.seed, ft.Round, strings.Join(points, ","))
			break
		}
	}
	if failure == nil {
		problems := finalChecks(ctx, r, coord, want, c)
		if len(problems) > 0 {
			c.Violations = append(c.Violations, violation{Round: 0, Point: "final", Fault: "the whole data dir at the end", Problems: problems})
			failure = fmt.Errorf("seed %d: the final checks failed", f.seed)
		}
	}
	c.Restarts = r.restarts
	r.close()
	c.ElapsedSec = time.Since(start).Seconds()
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(c)
	} else {
		c.render(stdout)
	}
	if failure != nil {
		return fmt.Errorf("%w; its directory is kept: %s", failure, dir)
	}
	if f.keep || f.dir != "" {
		return nil
	}
	return os.RemoveAll(dir)
}

// finalChecks look at the whole data dir once every round is done:
// coordinator verify --data (index against mirror, every mirror file, the
// mirror against JetStream), and the tree and the deliveries of every
// round's rollouts against the rounds' plans.
func finalChecks(ctx context.Context, r *rig, coord string, want map[string]string, c *campaign) []string {
	var problems []string
	runCoord := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, coord, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("coordinator %s: %v: %s%s", strings.Join(args, " "), err, errb.String(), lastLinesOf(out.String(), 20))
		}
		return out.String(), err
	}
	// The index catches up behind the mirror: give it a moment.
	var verr error
	for deadline := time.Now().Add(30 * time.Second); ; {
		var out string
		out, verr = runCoord("verify", "--data", r.data)
		if verr == nil && strings.Contains(out, "Mirror against JetStream: ok") {
			c.Final = append(c.Final, "coordinator verify --data: ok (index, mirror, mirror against JetStream)")
			break
		}
		if verr == nil {
			verr = fmt.Errorf("coordinator verify --data did not check the mirror against JetStream:\n%s", lastLinesOf(out, 20))
		}
		if time.Now().After(deadline) {
			problems = append(problems, verr.Error())
			c.Final = append(c.Final, "coordinator verify --data: FAILED")
			break
		}
		time.Sleep(time.Second)
	}
	out, err := runCoord("tree", "--data", r.data, "--json")
	if err != nil {
		return append(problems, err.Error())
	}
	var tr struct {
		Roots []treeNodeJSON `json:"roots"`
	}
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		return append(problems, "coordinator tree --json: "+err.Error())
	}
	got := map[string]string{}
	flattenTree(tr.Roots, got)
	for th, p := range want {
		if gp, ok := got[th]; !ok || gp != p {
			problems = append(problems, fmt.Sprintf("coordinator tree --data: thread %s has parent %q (present %v), the plan says %q", th, gp, ok, p))
		}
	}
	if len(problems) == 0 {
		c.Final = append(c.Final, fmt.Sprintf("coordinator tree --data: every round's %d threads where the plans put them", len(want)))
	}
	out, err = runCoord("unconfirmed", "--data", r.data, "--json")
	if err != nil {
		return append(problems, err.Error())
	}
	var u struct {
		ChildResults []struct {
			Parent string `json:"parent_thread"`
			Child  string `json:"child_thread"`
			State  string `json:"state"`
		} `json:"child_results"`
		Deliveries []struct {
			MsgID string `json:"msg_id"`
			State string `json:"state"`
			From  string `json:"from_thread"`
			To    string `json:"to_thread"`
		} `json:"deliveries"`
		Confirmed int `json:"confirmed"`
	}
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		return append(problems, "coordinator unconfirmed --json: "+err.Error())
	}
	pending := 0 // of the campaign's threads (an external bus may carry others)
	for _, cr := range u.ChildResults {
		if _, ok := want[cr.Child]; ok {
			pending++
			problems = append(problems, fmt.Sprintf("coordinator unconfirmed --data: the result of %s to %s is %s", cr.Child, cr.Parent, cr.State))
		}
	}
	var dups []string
	for _, d := range u.Deliveries {
		_, from := want[d.From]
		_, to := want[d.To]
		switch {
		case (from || to) && d.State == dedupe.PossiblyDuplicated:
			dups = append(dups, fmt.Sprintf("delivery %s from %s to %s is %s", d.MsgID, d.From, d.To, d.State))
		case from || to:
			pending++
			problems = append(problems, fmt.Sprintf("coordinator unconfirmed --data: delivery %s from %s to %s is %s", d.MsgID, d.From, d.To, d.State))
		}
	}
	if wantDups := c.Totals.WantDeliveries[dedupe.PossiblyDuplicated]; len(dups) != wantDups {
		pending++
		problems = append(problems, fmt.Sprintf("coordinator unconfirmed --data: %d deliveries possibly_duplicated, the rounds' ground truth %d:\n  %s", len(dups), wantDups, strings.Join(dups, "\n  ")))
	}
	wantConfirmed := c.Totals.WantDeliveries[dedupe.Confirmed]
	switch {
	case (r.external == "" || r.cluster != nil) && u.Confirmed != wantConfirmed: // the bus is the campaign's alone
		problems = append(problems, fmt.Sprintf("coordinator unconfirmed --data: %d deliveries confirmed, ground truth %d", u.Confirmed, wantConfirmed))
	case pending == 0:
		c.Final = append(c.Final, fmt.Sprintf("coordinator unconfirmed --data: %d deliveries confirmed (ground truth %d), %d possibly duplicated (ground truth %d), none other of the campaign's pending",
			u.Confirmed, wantConfirmed, len(dups), c.Totals.WantDeliveries[dedupe.PossiblyDuplicated]))
	}
	return problems
}

type treeNodeJSON struct {
	ThreadID string         `json:"thread_id"`
	Parent   string         `json:"parent_thread_id"`
	Children []treeNodeJSON `json:"children"`
}

func flattenTree(ns []treeNodeJSON, out map[string]string) {
	for _, n := range ns {
		out[n.ThreadID] = n.Parent
		flattenTree(n.Children, out)
	}
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
