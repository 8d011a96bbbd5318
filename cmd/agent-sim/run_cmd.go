package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/agent"
)

// runSummary is what `run` prints.
type runSummary struct {
	Root        string `json:"root"`
	Seed        uint64 `json:"seed"`
	Planned     int    `json:"planned_threads"`
	Threads     int    `json:"threads"`
	Turns       int    `json:"turns"`
	Records     int64  `json:"records"`
	Messages    int    `json:"messages"`
	SideEffects int    `json:"side_effects"`
	// ExecutedTwice counts world effects carried out more than once (never
	// expected: the world executes a key once); Rerequested counts keys
	// the agents asked for more than once (a retry of a proven call).
	ExecutedTwice int     `json:"executed_twice"`
	Rerequested   int     `json:"rerequested"`
	ElapsedSec    float64 `json:"elapsed_s"`
	// Truth is the ground truth, with --json.
	Truth []truthThread `json:"ground_truth,omitempty"`
}

type truthThread struct {
	Thread string `json:"thread"`
	Parent string `json:"parent"`
	Turns  int    `json:"turns"`
	// Records is the last ordinal the thread's writer was told was
	// acknowledged when it reported (its result sent): the bus and the
	// mirror must hold at least that many.
	Records int64        `json:"records"`
	Keys    []string     `json:"side_effect_keys"`
	Sent    []reportSent `json:"sent"`
}

func newRunCmd() *cobra.Command {
	var cf connFlags
	var p params
	var workers int
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "run --nats URL --seed S --agents N --depth D --turns T [--workers W] [--json]",
		Short: "Run one simulated tree to completion and print what it did",
		Long: `run creates a simulated tree's root (its id carries the seed, the agent
count, the depth, the turns and a run nonce) as the child of a driver thread
it holds, sends it its task, and waits until the root's result comes back:
every thread ran its turns, spawned its children, waited for their results
and answered its parent. The tree is run by workers: --workers W starts W
worker processes for the run (stopped at its end); without it, running
workers (agent-sim worker) do the work. A world (agent-sim world) must be
serving.

Deterministic for a seed: the tree's shape, each thread's turns and what
happens in them (calls, side-effect keys, compactions, model switches,
rollbacks). Not deterministic: ids that carry the run nonce, timestamps,
msg ids, and which worker runs what.

It prints threads, turns, records, messages, side effects and elapsed time;
--json prints the same as data with the ground truth (every thread with its
parent, turns, the records acknowledged when it answered its parent, the
side-effect keys it executed, every message it sent).
Exit status 1 if the tree did not complete within --timeout, a planned thread
never reported, or the world executed a side effect twice.`,
		Example: `  agent-sim run --nats nats://127.0.0.1:4222 --seed 7 --agents 20 --depth 3 --turns 4 --workers 3`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.check(); err != nil {
				return err
			}
			if p.Agents < 1 || p.Depth < 0 || p.Turn < 1 || workers < 0 {
				return usageError{errors.New("--agents and --turns must be at least 1, --depth and --workers at least 0")}
			}
			p.Run = strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36*36), 36)
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			sum, err := runTree(ctx, &cf, p, workers, cmd.ErrOrStderr())
			if sum != nil {
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					enc.Encode(sum)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "tree %s (seed %d): %d threads, %d turns, %d records, %d messages, %d side effects (%d executed twice, %d re-requested) in %.1fs\n",
						sum.Root, sum.Seed, sum.Threads, sum.Turns, sum.Records, sum.Messages, sum.SideEffects, sum.ExecutedTwice, sum.Rerequested, sum.ElapsedSec)
				}
				if !asJSON {
					sum.Truth = nil
				}
			}
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().Uint64Var(&p.Seed, "seed", 1, "the tree's seed")
	cmd.Flags().IntVar(&p.Agents, "agents", 20, "threads in the tree (fewer if --depth is reached first)")
	cmd.Flags().IntVar(&p.Depth, "depth", 3, "levels below the root")
	cmd.Flags().IntVar(&p.Turn, "turns", 4, "turns per thread")
	cmd.Flags().IntVar(&workers, "workers", 0, "worker processes to start for this run (0: use running ones)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary and the ground truth as JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this `DURATION`")
	return cmd
}

func runTree(ctx context.Context, cf *connFlags, p params, workers int, stderr io.Writer) (*runSummary, error) {
	log := logger(stderr, cf.verbose)
	start := time.Now()
	stop, err := startWorkers(cf, p, workers, stderr)
	if err != nil {
		return nil, err
	}
	defer stop()
	c, err := cf.connect(ctx, "agent-sim run", log)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	wc := &worldClient{nc: c.Conn(), timeout: 5 * time.Second}
	for wait := time.Now().Add(15 * time.Second); ; { // a world started just before may not answer yet
		_, err := wc.ledger(ctx)
		if err == nil {
			break
		}
		if time.Now().After(wait) || ctx.Err() != nil {
			return nil, fmt.Errorf("no world answers on %s (start agent-sim world): %w", cf.url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pl := buildPlan(p)
	driver, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "run-" + pl.root, Role: "sim-driver"})
	if err != nil {
		return nil, err
	}
	defer driver.Close(context.WithoutCancel(ctx))
	if _, err := driver.Spawn(ctx, agent.ThreadSpec{ID: pl.root, Role: "sim"}, agent.Task{Body: map[string]any{"seed": p.Seed}}); err != nil {
		return nil, err
	}
	for done := false; !done; {
		mail, err := driver.Receive(ctx, 1, time.Second)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("tree %s did not complete: %w", pl.root, ctx.Err())
		}
		if err != nil {
			return nil, err
		}
		for _, m := range mail {
			done = done || (m.Kind == agent.KindResult && m.From == pl.root)
		}
	}
	// Each thread reports to the world just after it answers its parent:
	// wait for the last reports.
	var l ledger
	for {
		l, err = wc.ledger(ctx)
		if err != nil {
			return nil, fmt.Errorf("world ledger: %w", err)
		}
		if allReported(l, pl) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	sum := &runSummary{Root: pl.root, Seed: p.Seed, Planned: len(pl.threads()), ElapsedSec: time.Since(start).Seconds(), Truth: []truthThread{}}
	reported := map[string]bool{}
	for _, r := range l.Reports {
		if r.Thread != pl.root && !strings.HasPrefix(r.Thread, pl.root+"-") {
			continue
		}
		reported[r.Thread] = true
		sum.Threads++
		sum.Turns += r.Turns
		sum.Records += r.Records
		sum.Messages += len(r.Sent)
		sum.Truth = append(sum.Truth, truthThread(r))
	}
	for _, e := range l.Effects {
		if e.Thread != pl.root && !strings.HasPrefix(e.Thread, pl.root+"-") {
			continue
		}
		sum.SideEffects++
		if e.Executions > 1 {
			sum.ExecutedTwice++
		}
		if e.Requests > 1 {
			sum.Rerequested++
		}
	}
	var missing []string
	for _, th := range pl.threads() {
		if !reported[th] {
			missing = append(missing, th)
		}
	}
	switch {
	case len(missing) > 0:
		return sum, fmt.Errorf("tree %s: %d planned threads never reported: %s", pl.root, len(missing), strings.Join(missing, ", "))
	case sum.ExecutedTwice > 0:
		return sum, fmt.Errorf("tree %s: %d side effects executed twice", pl.root, sum.ExecutedTwice)
	}
	return sum, nil
}

func allReported(l ledger, pl *plan) bool {
	got := map[string]bool{}
	for _, r := range l.Reports {
		got[r.Thread] = true
	}
	for _, th := range pl.threads() {
		if !got[th] {
			return false
		}
	}
	return true
}

// startWorkers starts n worker processes of this binary for a run.
func startWorkers(cf *connFlags, p params, n int, stderr io.Writer) (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var cmds []*exec.Cmd
	stop := func() {
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			c.Wait()
		}
	}
	for i := range n {
		args := []string{"worker", "--nats", cf.url, "--id", fmt.Sprintf("run-%s-w%d", p.Run, i)}
		for flag, v := range map[string]string{"--creds": cf.creds, "--nkey": cf.nkey, "--user": cf.user, "--password": cf.password,
			"--token": cf.token, "--tls-ca": cf.ca, "--tls-cert": cf.cert, "--tls-key": cf.key} {
			if v != "" {
				args = append(args, flag, v)
			}
		}
		c := exec.Command(self, args...)
		c.Stderr = stderr
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start worker %d: %w", i, err)
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}
