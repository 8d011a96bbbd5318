package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/reconcile"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

func newResumeCmd() *cobra.Command {
	var bf busFlags
	var retry, asJSON bool
	var model string
	cmd := &cobra.Command{
		Use:   "resume THREAD",
		Short: "Prepare a crashed thread to continue, without re-running anything",
		Long: `resume rebuilds THREAD from its rollout and records what is known about
what was in flight when it stopped. It never re-executes a call or re-sends a
message on its own.

It only runs once the thread's lease has expired (the old writer is gone),
then reads the thread once: from the data dir's mirror files as far as they
go, and from the bus only the records past them (the whole rollout from the
bus when there is no mirror file, or it is damaged or not the bus's). Then:
  - a turn that started and never ended becomes turn_aborted{stale_after_crash};
  - every call with no recorded result is listed as unknown (not failed, not
    pending: its effect may have happened);
  - calls with an idempotency key are put to a person on this terminal (when
    stdin is not a terminal, nobody is asked: nothing is recorded, they stay
    unknown, and the output names the reconcile command to run once you know);
  - each send with no receipt is looked up: still on the MAIL stream means
    published; absent from MAIL and never received means never published;
  - every answer is recorded as reconciled{..., outcome, evidence, by}, unless
    the rollout already says exactly that. A resume that learns nothing new
    appends nothing.

--retry-proven-not-executed re-sends, under their original msg_id, only the
messages proven never published. Calls proven not executed are recorded as
such; the agent may then run them again (the coordinator runs no tools).

Needs a serving coordinator (the bus). Exit status: 0 when resumed, 1 on an
error (the lease is still held: the old writer may be alive), 2 for a usage
error.`,
		Example: `  coordinator resume release-B
  coordinator resume release-P --retry-proven-not-executed --json`,
		Args: checkedArgs(cobra.ExactArgs(1), bf.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, bus, done, err := bf.open(cmd, bf.timeout)
			if err != nil {
				return err
			}
			defer done()
			thread := args[0]
			in := cmd.InOrStdin()
			interactive := false
			if f, ok := in.(*os.File); ok {
				interactive = term.IsTerminal(int(f.Fd()))
			}
			opt := reconcile.ResumeOptions{
				Holder:                 holder("resume"),
				Prober:                 &reconcile.Terminal{In: in, Out: cmd.ErrOrStderr(), Interactive: interactive, Who: userName()},
				RetryProvenNotExecuted: retry,
				Model:                  model,
				Deliveries: func(ctx context.Context) ([]dedupe.Delivery, error) {
					return deliveriesFor(ctx, bus, thread)
				},
				DataDir: mirrorDir(&bf),
			}
			rep, err := reconcile.Resume(ctx, bus, thread, opt)
			if err != nil {
				return err
			}
			if asJSON {
				out, err := resumeOf(rep)
				if err != nil {
					return err
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			renderResume(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	bf.register(cmd)
	cmd.Flags().BoolVar(&retry, "retry-proven-not-executed", false, "re-send the messages proven never published (same msg_id); nothing else")
	cmd.Flags().StringVar(&model, "model", "", "the model `M` the resumed session will use (warns when it differs)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// mirrorDir is the data dir whose mirror a resume replays from: the one
// that names the bus (no --nats), or the one --data names explicitly; ""
// when it has no mirror (the bus is read from the start).
func mirrorDir(bf *busFlags) string {
	if bf.natsURL != "" && bf.data == "" {
		return "" // the default data dir may mirror another bus
	}
	dir, err := bf.dataDir()
	if err != nil {
		return ""
	}
	if st, err := os.Stat(datadir.RolloutsDir(dir)); err != nil || !st.IsDir() {
		return ""
	}
	return dir
}

// deliveriesFor is the ledger a resume or a reconcile of thread needs: its
// deliveries, read from the bus with its peers' views (ops.ThreadDeliveries;
// never the whole mirror, which may lag the bus and grows with the data dir).
func deliveriesFor(ctx context.Context, bus *stream.Bus, thread string) ([]dedupe.Delivery, error) {
	return ops.ThreadDeliveries(ctx, bus, thread)
}

func userName() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

func renderResume(w io.Writer, rep *reconcile.ResumeReport) {
	fmt.Fprintf(w, "Resumed thread %s (rollout %s).\n", rep.Thread, rep.Rollout)
	if rep.Aborted != "" {
		fmt.Fprintf(w, "Turn %s had started and never ended: recorded as turn_aborted{stale_after_crash}.\n", rep.Aborted)
	}
	if n := len(rep.Plan.Unknown); n > 0 {
		fmt.Fprintf(w, "\nCalls with no recorded result (%d): unknown — not failed, not pending; never retried here.\n", n)
		tw := newTable(w)
		fmt.Fprintln(tw, "  CALL\tNAME\tIDEMPOTENCY KEY\tTURN")
		for _, c := range rep.Plan.Unknown {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.CallID, c.Name, orDash(c.IdempotencyKey), orDash(c.TurnID))
		}
		tw.Flush()
	}
	if len(rep.Recorded) > 0 {
		fmt.Fprintf(w, "\nRecorded as reconciled:\n")
		tw := newTable(w)
		fmt.Fprintln(tw, "  WHAT\tOUTCOME\tBY\tEVIDENCE")
		for _, f := range rep.Recorded {
			what := "call " + f.Question.CallID
			if f.Question.MsgID != "" {
				what = "message " + f.Question.MsgID + " to " + f.Question.To
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", what, f.Answer.Outcome, f.Answer.By, f.Answer.Evidence)
		}
		tw.Flush()
	}
	if n := len(rep.Findings) - len(rep.Recorded); n > 0 {
		fmt.Fprintf(w, "%s already on record: not recorded again.\n", plural(n, "answer", "answers"))
	}
	if open := unresolved(rep); len(open) > 0 {
		fmt.Fprintf(w, "\nStill unknown (%d): nobody here knows what happened; a person must find out and reconcile each:\n", len(open))
		for _, c := range open {
			fmt.Fprintf(w, "  %s\n", reconcileCommand(rep.Thread, c.CallID))
		}
	}
	if rep.Appended == 0 {
		fmt.Fprintln(w, "\nNothing new learned: nothing appended.")
	} else {
		fmt.Fprintf(w, "\nAppended %s.\n", plural(rep.Appended, "record", "records"))
	}
	for _, m := range rep.Resent {
		fmt.Fprintf(w, "Re-sent %s under its original msg_id (proven never published).\n", m)
	}
	fmt.Fprintln(w, readLine(rep.Read))
	fmt.Fprintln(w)
	summarize(w, rep.State)
	for _, warn := range rep.State.Warnings {
		fmt.Fprintf(w, "warning %s: %s\n", warn.Code, warn.Message)
	}
}

// readLine says where the resume read the thread from.
func readLine(r ops.ReadStats) string {
	var line string
	if r.MirrorOrdinal > 0 {
		line = fmt.Sprintf("Read ordinals 1-%d from the mirror and %s from the bus", r.MirrorOrdinal, plural(int(r.BusRecords), "record", "records"))
	} else {
		line = fmt.Sprintf("Read %s from the bus", plural(int(r.BusRecords), "record", "records"))
	}
	if r.MirrorBases > 0 {
		line += fmt.Sprintf(" (%s from the mirror)", plural(r.MirrorBases, "base rollout", "base rollouts"))
	}
	line += fmt.Sprintf(", %s.", plural(int(r.BusGets), "message get", "message gets"))
	if r.Fallback != "" {
		line += " Not from the mirror: " + r.Fallback + "."
	}
	return line
}

func newReconcileCmd() *cobra.Command {
	var bf busFlags
	var rec rollout.Reconciled
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "reconcile THREAD (--call ID | --msg ID) --outcome OUTCOME --evidence TEXT",
		Short: "Record what a person found out about a call or a message",
		Long: `reconcile appends reconciled{call_id|msg_id, outcome, evidence, by} to an
idle THREAD: what you checked in the outside world about a call whose result
was never logged, or a message whose delivery is in doubt.

OUTCOME is executed, not_executed, duplicate or unknown. A call reconciled as
anything but unknown is no longer dangling; unknown is kept for the record and
the call stays dangling.

Only what is open in THREAD can be reconciled: a call with no recorded result
(resume and replay list them), or a message from or to THREAD whose delivery
is not confirmed (unconfirmed lists them). Any other id is refused with the
open ones listed, and nothing is appended.

Needs a serving coordinator (the bus) and an idle thread (its lease free).
Exit status: 0 when recorded, 1 on an error (the id is not open, the thread is
active), 2 for a usage error (a bad --outcome, no --evidence, not exactly one
of --call and --msg).`,
		Example: `  coordinator reconcile release-B --call call-deploy --outcome executed --evidence "release 1.4.2 is live on staging"`,
		Args: checkedArgs(cobra.ExactArgs(1), bf.check, func() error {
			if (rec.CallID == "") == (rec.MsgID == "") {
				return errors.New("give exactly one of --call ID or --msg ID")
			}
			if !reconcile.ValidOutcome(rec.Outcome) {
				return fmt.Errorf("--outcome %q: want executed, not_executed, duplicate or unknown", rec.Outcome)
			}
			if strings.TrimSpace(rec.Evidence) == "" {
				return errors.New("--evidence: say what you checked")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, bus, done, err := bf.open(cmd, bf.timeout)
			if err != nil {
				return err
			}
			defer done()
			if rec.By == "" {
				rec.By = "person:" + userName()
			}
			ord, err := reconcile.Note(ctx, bus, args[0], holder("reconcile"), rec, func(ctx context.Context) ([]dedupe.Delivery, error) {
				return deliveriesFor(ctx, bus, args[0])
			})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), reconcileJSON{ThreadID: args[0], Ordinal: ord, CallID: rec.CallID, MsgID: rec.MsgID,
					Outcome: rec.Outcome, Evidence: rec.Evidence, By: rec.By})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Recorded at ordinal %d of thread %s: %s, by %s.\n", ord, args[0], rec.Outcome, rec.By)
			return nil
		},
	}
	bf.register(cmd)
	cmd.Flags().StringVar(&rec.CallID, "call", "", "the call's `ID`")
	cmd.Flags().StringVar(&rec.MsgID, "msg", "", "the message's msg_id (`ID`)")
	cmd.Flags().StringVar(&rec.Outcome, "outcome", "", "`OUTCOME`: executed, not_executed, duplicate or unknown (required)")
	cmd.Flags().StringVar(&rec.Evidence, "evidence", "", "what you checked, as `TEXT` (required)")
	cmd.Flags().StringVar(&rec.By, "by", "", "who checked: a `NAME` (default person:$USER)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the record as JSON")
	cmd.MarkFlagRequired("outcome")  //nolint:errcheck // the flag exists
	cmd.MarkFlagRequired("evidence") //nolint:errcheck // the flag exists
	return cmd
}
