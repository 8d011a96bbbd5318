package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

const notUndoneHelp = `
Outside effects are NOT undone: files written, deployments made, requests
sent and services started stay as they are. Only the history the thread's
next session sees changes.`

func newForkCmd() *cobra.Command {
	var bf busFlags
	var opt ops.ForkOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fork THREAD",
		Short: "Start a new thread from a frozen point of another's history",
		Long: `fork creates a new thread that shares THREAD's past up to a turn boundary
of a turn in effect, and has its own future:

  --before-turn T   the shared history ends just before turn T
  --after-turn T    it ends after turn T
  (neither)         it ends at THREAD's latest durable state

--mode copy (default) copies the prefix into the child's rollout, payload bytes
unchanged; --mode reference writes only a history_base naming the frozen
prefix, and reading the child joins it with the child's own records (the
parent's rollout is then kept as plain JSONL and never garbage collected).
Either way, later appends to THREAD never change the child's past. A fork
point inside a turn that has not ended gives the child a synthesized
turn_aborted{interrupted}. A rolled-back turn is not a fork point.
` + notUndoneHelp + `

Needs a serving coordinator (the bus). Exit status: 0 when forked, 1 on an
error, 2 for a usage error.`,
		Example: `  coordinator fork thread-A --after-turn fix-login
  coordinator fork thread-R --before-turn migrate --mode reference --json`,
		Args: checkedArgs(cobra.ExactArgs(1), bf.check, func() error {
			if opt.Mode != ops.ModeCopy && opt.Mode != ops.ModeReference {
				return fmt.Errorf("--mode %q: want copy or reference", opt.Mode)
			}
			if opt.BeforeTurn != "" && opt.AfterTurn != "" {
				return errors.New("give --before-turn or --after-turn, not both")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, bus, done, err := bf.open(cmd, bf.timeout)
			if err != nil {
				return err
			}
			defer done()
			src, err := ops.Load(ctx, bus, args[0])
			if err != nil {
				return err
			}
			opt.Holder = holder("fork")
			res, err := ops.Fork(ctx, bus, src, opt)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				out, err := forkOf(res)
				if err != nil {
					return err
				}
				return writeJSON(w, out)
			}
			fmt.Fprintf(w, "Forked %s (rollout %s) into thread %s, rollout %s, by %s.\n", res.From, res.FromRollout, res.Thread, res.Rollout, res.Mode)
			if res.Mode == ops.ModeCopy {
				fmt.Fprintf(w, "Copied %s of %s's history.\n", plural(res.Copied, "record", "records"), res.From)
			} else {
				fmt.Fprintf(w, "history_base: rollout %s up to ordinal %d (byte %s).\n", res.Position.RolloutID, res.Position.EndOrdinalExclusive, num(res.Position.EndByteOffset))
			}
			if res.AbortedTurn != "" {
				fmt.Fprintf(w, "Turn %s was active at the fork point: the child has it as aborted (interrupted).\n", res.AbortedTurn)
			}
			summarize(w, res.State)
			fmt.Fprintln(w, ops.NotUndone)
			return nil
		},
	}
	bf.register(cmd)
	cmd.Flags().StringVar(&opt.BeforeTurn, "before-turn", "", "the shared history ends just before this `TURN`")
	cmd.Flags().StringVar(&opt.AfterTurn, "after-turn", "", "the shared history ends after this `TURN`")
	cmd.Flags().StringVar(&opt.Mode, "mode", ops.ModeCopy, "`MODE`: copy or reference")
	cmd.Flags().StringVar(&opt.Thread, "thread", "", "the child's thread `ID` (default: a new ULID)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newRollbackCmd() *cobra.Command {
	var bf busFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rollback THREAD N",
		Short: "Take the last N user turns of an idle legacy thread out of effect",
		Long: `rollback appends thread_rolled_back{N} to THREAD's rollout and replays it:
the N newest user turns in effect (and everything after the first of them) are
no longer in effect. The records stay in the log, for audit and as fork
sources. Consecutive rollbacks add up. N above the user turns in effect is
refused, naming them: a rollback never silently does less than asked.

Only legacy threads (marker-based history), and only when idle: the thread's
lease must be free, so no agent is writing it. A paginated thread refuses and
points to revert.
` + notUndoneHelp + `

Needs a serving coordinator (the bus). Exit status: 0 when rolled back, 1 on
an error (an active thread, a paginated one), 2 for a usage error.`,
		Example: `  coordinator rollback thread-M 1`,
		Args: checkedArgs(func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(2)(cmd, args); err != nil {
				return err
			}
			if _, err := turnCount(args[1]); err != nil {
				return err
			}
			return nil
		}, bf.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := turnCount(args[1])
			if err != nil {
				return err
			}
			ctx, bus, done, err := bf.open(cmd, bf.timeout)
			if err != nil {
				return err
			}
			defer done()
			res, err := ops.Rollback(ctx, bus, args[0], n, holder("rollback"))
			if err != nil {
				return err
			}
			return reportHistory(cmd.OutOrStdout(), res, asJSON, "Rolled back")
		},
	}
	bf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// turnCount is rollback's N: a whole number of user turns, at least 1.
func turnCount(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("rollback N: the number of user turns must be a whole number, at least 1 (got %q)", s)
	}
	return n, nil
}

func newRevertCmd() *cobra.Command {
	var bf busFlags
	var before string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revert THREAD --before-turn T",
		Short: "Point a paginated thread at a new rollout whose history ends before a turn",
		Long: `revert keeps THREAD's identity and gives it a new rollout whose history_base
ends just before turn T (a turn in effect). The old rollout is not rewritten:
it is sealed with rollout_sealed{successor} — fenced by the tail revert read,
so a concurrent append makes the revert fail rather than be lost, and no
append to the old rollout is accepted after the seal — and only then is the
thread's THREADS pointer switched by compare-and-swap. A crash between the
seal and the switch is finished by the coordinator at start-up.

Only paginated threads; a legacy thread refuses and points to rollback.
` + notUndoneHelp + `

Needs a serving coordinator (the bus). Exit status: 0 when reverted, 1 on an
error (the thread moved on meanwhile: try again), 2 for a usage error.`,
		Example: `  coordinator revert thread-R --before-turn migrate`,
		Args:    checkedArgs(cobra.ExactArgs(1), bf.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, bus, done, err := bf.open(cmd, bf.timeout)
			if err != nil {
				return err
			}
			defer done()
			res, err := ops.Revert(ctx, bus, args[0], before)
			if err != nil {
				return err
			}
			return reportHistory(cmd.OutOrStdout(), res, asJSON, "Reverted")
		},
	}
	bf.register(cmd)
	cmd.Flags().StringVar(&before, "before-turn", "", "the new history ends just before this `TURN` (required)")
	cmd.MarkFlagRequired("before-turn") //nolint:errcheck // the flag exists
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func reportHistory(w io.Writer, res *ops.Result, asJSON bool, verb string) error {
	if asJSON {
		out, err := historyOf(res)
		if err != nil {
			return err
		}
		return writeJSON(w, out)
	}
	fmt.Fprintf(w, "%s thread %s.", verb, res.Thread)
	if res.Sealed != "" {
		fmt.Fprintf(w, " Rollout %s is sealed; the thread now reads rollout %s", res.Sealed, res.Rollout)
		if res.Base != nil {
			fmt.Fprintf(w, " (history_base: %s up to ordinal %d)", res.Base.RolloutID, res.Base.EndOrdinalExclusive)
		}
		fmt.Fprint(w, ".")
	}
	fmt.Fprintln(w)
	if len(res.Undone) > 0 {
		fmt.Fprintf(w, "No longer in effect: %s %s.\n", plural(len(res.Undone), "turn", "turns"), strings.Join(res.Undone, ", "))
	}
	summarize(w, res.State)
	fmt.Fprintln(w, ops.NotUndone)
	return nil
}

// summarize prints the few facts of a state a person checks after an
// operation.
func summarize(w io.Writer, st *replay.State) {
	if st == nil {
		return
	}
	fmt.Fprintf(w, "Now in effect: %s, model %s, approval %s, window %d.\n",
		plural(len(st.History), "history item", "history items"), orDash(st.Model), orDash(st.ApprovalPolicy), st.Window)
	var ts []string
	for _, t := range st.Turns {
		ts = append(ts, t.TurnID+" "+t.Status)
	}
	if len(ts) > 0 {
		fmt.Fprintf(w, "Turns: %s.\n", strings.Join(ts, ", "))
	}
}
