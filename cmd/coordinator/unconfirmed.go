package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/dedupe"
)

func newUnconfirmedCmd() *cobra.Command {
	var src sourceFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "unconfirmed",
		Short: "Which child results are still unconfirmed, and every delivery not confirmed",
		Long: `unconfirmed answers the question operators ask most: which child results
are still unconfirmed — tasks whose child never sent a result, and results with
no receipt at the parent — and lists every cross-thread delivery that is not
confirmed.

Deliveries are judged from the rollouts alone (the bus is never the judge of
"delivered once"): a delivery is confirmed (sent, received exactly once, in
effect), unconfirmed (sent, no receipt at all), possibly_duplicated (received
more than once, or its idempotency key received under two msg_ids),
orphan_receipt (received, no send anywhere) or rolled_back_receipt (its only
receipt was rolled back or reverted away). A record a fork copied counts once.

Exit status: 0 whatever is found (this is a report, not a check), 1 when the
rollouts cannot be read, 2 for a usage error.`,
		Example: `  coordinator unconfirmed --rollouts testdata/examples/release-tree
  coordinator unconfirmed --data /var/lib/logbook --json`,
		Args: checkedArgs(cobra.NoArgs, src.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := src.build(cmd.Context())
			if err != nil {
				return err
			}
			var pending []dedupe.Delivery
			for _, d := range t.Deliveries {
				if d.State != dedupe.Confirmed {
					pending = append(pending, d)
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), unconfirmedOf(t.ChildResults, pending, len(t.Deliveries)-len(pending)))
			}
			renderUnconfirmed(cmd.OutOrStdout(), t.ChildResults, pending, len(t.Deliveries))
			return nil
		},
	}
	src.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print child_results and deliveries as JSON")
	return cmd
}

func renderUnconfirmed(w io.Writer, results []dedupe.ChildResult, pending []dedupe.Delivery, total int) {
	fmt.Fprintf(w, "Child results still unconfirmed: %d\n", len(results))
	if len(results) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "  PARENT\tCHILD\tTASK\tRESULT\tSTATE\tWHY")
		for _, r := range results {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", r.Parent, r.Child, orDash(r.TaskMsgID), orDash(r.ResultMsgID), r.State, r.Reason)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nDeliveries not confirmed: %d of %d\n", len(pending), total)
	if len(pending) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "  MSG\tKIND\tFROM\tTO\tIDEMPOTENCY KEY\tSTATE\tWHY")
		for _, d := range pending {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.MsgID, orDash(d.Kind), orDash(d.FromThread), d.ToThread, orDash(d.IdempotencyKey), d.State, d.Reason)
		}
		tw.Flush()
	}
}
