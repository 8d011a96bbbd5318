package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook-agents/logbook/internal/simcrash"
)

// enumOptions are the exhaustive crash mode's settings (agent-sim
// enumerate; `crash --enumerate` takes the same flags).
type enumOptions struct {
	Seeds    int    // seeds SeedFrom .. SeedFrom+Seeds-1
	SeedFrom uint64 // first seed
	// MirrorSeeds: the mirror's points are walked for the first this many
	// seeds (0: all). Each offers one position per message published.
	MirrorSeeds int
	Trees       []string
	Points      []string
	Parallel    int    // scenarios at once
	Procs       int    // GOMAXPROCS while it runs (the embedded server's JetStream API workers)
	Dir         string // where the bus, the mirror and the index live ("" a temp dir)
	Scenario    string // run this one scenario id only
	JSON        bool
}

func registerEnumFlags(fl *pflag.FlagSet, o *enumOptions) {
	fl.IntVar(&o.Seeds, "seeds", 1, "how many seeds each tree is scripted with")
	fl.Uint64Var(&o.SeedFrom, "seed-from", 1, "the first seed")
	fl.IntVar(&o.MirrorSeeds, "mirror-seeds", 0, "walk the mirror's crash points for the first N seeds only (0: all)")
	fl.StringSliceVar(&o.Trees, "trees", nil, "trees to walk (default all: "+strings.Join(simcrash.Trees, ",")+")")
	fl.StringSliceVar(&o.Points, "points", nil, "crash points to walk (default all: "+strings.Join(simcrash.Points, ",")+")")
	fl.IntVar(&o.Parallel, "parallel", 16, "scenarios run at once")
	fl.IntVar(&o.Procs, "procs", 8, "GOMAXPROCS while running (more JetStream API workers in the embedded server; not more CPU)")
	fl.StringVar(&o.Dir, "dir", "", "`DIR` for the bus store, mirror and index (default a temp dir, on /dev/shm when there is one; removed after)")
	fl.StringVar(&o.Scenario, "scenario", "", "run only this scenario `ID` (tree/seed/point/position, as a violation prints it)")
	fl.BoolVar(&o.JSON, "json", false, "print the report as JSON")
}

func (o *enumOptions) check() error {
	if o.Seeds < 1 || o.Parallel < 1 || o.Procs < 1 || o.MirrorSeeds < 0 {
		return usageError{errors.New("--seeds, --parallel and --procs must be at least 1, --mirror-seeds at least 0")}
	}
	for _, t := range o.Trees {
		if !slices.Contains(simcrash.Trees, t) {
			return usageError{fmt.Errorf("--trees: no tree %q (want %s)", t, strings.Join(simcrash.Trees, ", "))}
		}
	}
	for _, p := range o.Points {
		if !slices.Contains(simcrash.Points, p) {
			return usageError{fmt.Errorf("--points: no crash point %q (want %s)", p, strings.Join(simcrash.Points, ", "))}
		}
	}
	if o.Scenario != "" {
		if _, err := simcrash.ParseID(o.Scenario); err != nil {
			return usageError{fmt.Errorf("--scenario: %w", err)}
		}
	}
	return nil
}

func newEnumerateCmd() *cobra.Command {
	var o enumOptions
	cmd := &cobra.Command{
		Use:    "enumerate [--seeds N] [--trees LIST] [--points LIST] [--json] [--scenario ID]",
		Short:  "Exhaustive crash mode: every crash point at every position, in one process",
		Hidden: true,
		Long: `enumerate walks every named crash point at every position it is reached in
small scripted trees, for each seed, and checks DESIGN §8's invariants after
each scenario. Everything runs in this process: an embedded nats-server with
JetStream, the coordinator's mirror and index on a temp data dir, agent
processes on the public agent package (each behind a proxy that parses
the NATS protocol: a crash cuts the process's connection exactly at the
point, so nothing after it reaches the bus), and the world's ledger.

Trees: tree (a root, two children, a grandchild), fork, revert, resend (a
re-sent task). Points: ` + strings.Join(simcrash.Points, ", ") + `.

It prints a table of scenarios and violations per tree and point; --json
prints the report. Exit status 1 on any violation, naming the scenario;
--scenario ID runs that one again.`,
		Example: `  agent-sim enumerate --seeds 40
  agent-sim enumerate --scenario tree/3/after_effect/5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return runEnumerate(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	registerEnumFlags(cmd.Flags(), &o)
	return cmd
}

// runEnumerate runs the exhaustive mode and writes its report to stdout. A
// violation is an error naming the first failing scenario.
func runEnumerate(ctx context.Context, o enumOptions, stdout io.Writer) error {
	if o.Parallel <= 0 {
		o.Parallel = 16
	}
	if o.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.Procs))
	}
	defer debug.SetGCPercent(debug.SetGCPercent(200))
	dir, err := enumDir(o.Dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, err := simcrash.NewEnv(ctx, simcrash.EnvOptions{Dir: dir})
	if err != nil {
		return fmt.Errorf("enumerate: start the bus and the mirror in %s: %w", dir, err)
	}
	defer env.Close()
	if o.Scenario != "" {
		res, err := simcrash.RunOne(ctx, env, o.Scenario)
		if err != nil {
			return usageError{err}
		}
		return printOne(stdout, res, o.JSON)
	}
	opt := simcrash.Options{Trees: o.Trees, Points: o.Points, Parallel: o.Parallel, MirrorSeeds: o.MirrorSeeds}
	for i := range o.Seeds {
		opt.Seeds = append(opt.Seeds, o.SeedFrom+uint64(i))
	}
	last := time.Now()
	if !o.JSON {
		start := time.Now()
		opt.Progress = func(done int, r *simcrash.Result) {
			if time.Since(last) >= 10*time.Second {
				last = time.Now()
				fmt.Fprintf(stdout, "... %d runs in %.0fs\n", done, time.Since(start).Seconds())
			}
		}
	}
	rep, err := simcrash.Enumerate(ctx, env, opt)
	if err != nil {
		return fmt.Errorf("enumerate: %w", err)
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printReport(stdout, rep)
	}
	if rep.Violations > 0 {
		f := rep.Failed[0]
		return fmt.Errorf("%d of %d runs broke an invariant; first: %s: %s (run it again: agent-sim enumerate --scenario %s)",
			rep.Violations, rep.Scenarios+rep.Clean, f.ID(), f.Problems[0], f.ID())
	}
	return nil
}

// enumDir makes the run's directory: under dir, else on /dev/shm when it
// exists (the scenarios crash processes, not machines: fsync to a disk
// only costs time), else the OS temp dir.
func enumDir(dir string) (string, error) {
	if dir == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			dir = "/dev/shm"
		}
	}
	d, err := os.MkdirTemp(dir, "agent-sim-enumerate-")
	if err != nil {
		return "", fmt.Errorf("enumerate: --dir: %w", err)
	}
	return d, nil
}

func printReport(w io.Writer, rep *simcrash.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tree\tpoint\tscenarios\tpositions\tviolations\t")
	for _, c := range rep.Cells {
		if c.Scenarios == 0 && c.Violations == 0 {
			continue
		}
		pos := fmt.Sprint(c.Positions)
		if c.Point == "clean" {
			pos = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t\n", c.Tree, c.Point, c.Scenarios, pos, c.Violations)
	}
	tw.Flush()
	rate := float64(rep.Scenarios+rep.Clean) / max(rep.ElapsedSec, 1e-9)
	fmt.Fprintf(w, "%d crash scenarios (tree x point x position x seed; %d seeds, the mirror's points for %d) and %d clean runs in %.1fs (%.1f runs/s): %d violations\n",
		rep.Scenarios, len(rep.Seeds), len(rep.MirrorSeeds), rep.Clean, rep.ElapsedSec, rate, rep.Violations)
	if rep.Repeats > 0 {
		fmt.Fprintf(w, "%d tree x seed pairs skipped: their script repeats an earlier seed's\n", rep.Repeats)
	}
	fmt.Fprintf(w, "checked: %d processes, %d effects in the world's ledger, %d probe findings, %d mail re-sent, %d acknowledged packs, %d records on the bus\n",
		rep.Processes, rep.Effects, rep.Findings, rep.Resent, rep.Acked, rep.Records)
	for i, f := range rep.Failed {
		if i == 20 {
			fmt.Fprintf(w, "... and %d more\n", len(rep.Failed)-i)
			break
		}
		fmt.Fprintf(w, "VIOLATION %s: %s\n", f.ID(), strings.Join(f.Problems, "; "))
	}
}

func printOne(w io.Writer, r *simcrash.Result, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "%s: reached %v, %d processes, %d effects, %d probe findings, %d mail re-sent, %d acknowledged packs, %d records, %.2fs\n",
			r.ID(), r.Reached, r.Processes, r.Effects, r.Findings, r.Resent, r.Acked, r.Records, r.Elapsed)
		for _, p := range r.Problems {
			fmt.Fprintf(w, "VIOLATION %s\n", p)
		}
	}
	switch {
	case r.Failed():
		return fmt.Errorf("%s broke %d invariants: %s", r.ID(), len(r.Problems), r.Problems[0])
	case r.Point != "" && !r.Reached:
		return fmt.Errorf("%s: the process never reached %s a %dth time (the seed's run has fewer positions)", r.ID(), r.Point, r.At)
	}
	return nil
}
