package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/index"
)

func newUnconfirmedCmd() *cobra.Command {
	var src sourceFlags
	var pf pageFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "unconfirmed [THREAD]",
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

With --data the answer comes from the data dir's index, which judges each
delivery as it indexes the mirror (a query, not a replay of every file); a
data dir without an index is read file by file, as --rollouts reads any
directory. Both give the same answer (verify --data checks it).

With THREAD (or --thread), only the deliveries from or to that thread and the
child results it is the parent or the child of. --state keeps the deliveries
and child results in one state (confirmed lists the confirmed deliveries);
--limit N ends each list after N with the cursor of the next page (--after).

Exit status: 0 whatever is found (this is a report, not a check), 1 when the
rollouts or the index cannot be read, THREAD is not there or the cursor is not
valid, 2 for a usage error.`,
		Example: `  coordinator unconfirmed --rollouts testdata/examples/release-tree
  coordinator unconfirmed --data /var/lib/logbook --json
  coordinator unconfirmed --data /var/lib/logbook release-P --state no_result --limit 20`,
		Args: pf.args(&src),
		RunE: func(cmd *cobra.Command, args []string) error {
			page, err := unconfirmedPage(cmd.Context(), &src, &pf)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), unconfirmedOf(page.ChildResults, page.Deliveries, page.Confirmed, page.NextCursor))
			}
			renderUnconfirmed(cmd.OutOrStdout(), page, pf.paged() || pf.thread != "", pf.nextHint("unconfirmed", &src, page.NextCursor))
			return nil
		},
	}
	src.register(cmd)
	pf.register(cmd, index.States...)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print child_results, deliveries, confirmed and next_cursor as JSON")
	return cmd
}

// unconfirmedPage asks the data dir's index, else pages the full scan's
// ledger by the same rules.
func unconfirmedPage(ctx context.Context, src *sourceFlags, pf *pageFlags) (index.UnconfirmedPage, error) {
	uq := index.UnconfirmedQuery{State: pf.state, Limit: pf.limit, After: pf.after}
	r, _, err := src.index(ctx)
	if err != nil {
		return index.UnconfirmedPage{}, err
	}
	if r != nil {
		defer r.Close()
		if pf.thread != "" {
			if uq.Thread, err = r.ResolveNode(ctx, pf.thread); err != nil {
				return index.UnconfirmedPage{}, err
			}
		}
		return r.Unconfirmed(ctx, uq)
	}
	c, _, err := src.load()
	if err != nil {
		return index.UnconfirmedPage{}, err
	}
	t := treeOfCorpus(c)
	if pf.thread != "" {
		n, err := t.Find(pf.thread)
		if err != nil {
			return index.UnconfirmedPage{}, err
		}
		uq.Thread = n.ThreadID
	}
	return index.PageUnconfirmed(t.ChildResults, t.Deliveries, uq)
}

func renderUnconfirmed(w io.Writer, page index.UnconfirmedPage, partial bool, next string) {
	results, pending := page.ChildResults, page.Deliveries
	fmt.Fprintf(w, "Child results still unconfirmed: %d\n", len(results))
	if len(results) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "  PARENT\tCHILD\tTASK\tRESULT\tSTATE\tWHY")
		for _, r := range results {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", r.Parent, r.Child, orDash(r.TaskMsgID), orDash(r.ResultMsgID), r.State, r.Reason)
		}
		tw.Flush()
	}
	if partial {
		fmt.Fprintf(w, "\nDeliveries listed: %d (%d confirmed)\n", len(pending), page.Confirmed)
	} else {
		fmt.Fprintf(w, "\nDeliveries not confirmed: %d of %d\n", len(pending), len(pending)+page.Confirmed)
	}
	if len(pending) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "  MSG\tKIND\tFROM\tTO\tIDEMPOTENCY KEY\tSTATE\tWHY")
		for _, d := range pending {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.MsgID, orDash(d.Kind), orDash(d.FromThread), d.ToThread, orDash(d.IdempotencyKey), d.State, d.Reason)
		}
		tw.Flush()
	}
	if page.NextCursor != "" {
		fmt.Fprintf(w, "\nnext page: %s\n", next)
	}
}
