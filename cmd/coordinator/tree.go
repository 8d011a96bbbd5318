package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/tree"
)

func newTreeCmd() *cobra.Command {
	var src sourceFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tree [THREAD]",
		Short: "Show the lineage tree of agent threads, with statuses",
		Long: `tree rebuilds the parent/child lineage of every thread from the rollouts
alone: spawn edges (thread_spawned in a parent, parent_thread_id or Codex's
source.subagent.thread_spawn.parent_thread_id in a child) and fork edges
(forked_from_id), each thread's current rollout and its earlier ones (revert
chains).

A node is active (a writer holds its lease), needs_attention (an interrupted
turn, calls whose outcome is unknown, deliveries to it not confirmed, or child
results still unconfirmed: the counts say which), or idle. A child that never
wrote a line is still shown, from its parent's record of the spawn. Orphans
(their parent is nowhere), duplicate thread IDs and cycles are reported below
the tree, never fatal.

With THREAD, only that thread's subtree is shown.

Exit status: 0 when the tree was built (problems in the input are reported,
not fatal), 1 when the directory cannot be read or THREAD is not there, 2 for
a usage error.`,
		Example: `  coordinator tree --rollouts ~/.codex/sessions
  coordinator tree --data /var/lib/logbook release-P --json`,
		Args: checkedArgs(cobra.MaximumNArgs(1), src.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := src.build(cmd.Context())
			if err != nil {
				return err
			}
			roots := t.Roots
			if len(args) == 1 {
				n, err := t.Find(args[0])
				if err != nil {
					return fmt.Errorf("%w (tree without THREAD lists them all)", err)
				}
				roots = []*tree.Node{n}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), treeOf(t, roots))
			}
			renderTree(cmd.OutOrStdout(), t, roots)
			return nil
		},
	}
	src.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tree as JSON")
	return cmd
}

func renderTree(w io.Writer, t *tree.Tree, roots []*tree.Node) {
	if len(roots) == 0 {
		fmt.Fprintln(w, "no threads")
	}
	for _, n := range roots {
		renderNode(w, n, "", "")
	}
	if len(t.Orphans) > 0 {
		fmt.Fprintf(w, "\nOrphans (their parent thread is nowhere here): %s\n", strings.Join(t.Orphans, ", "))
	}
	if len(t.Problems) > 0 {
		fmt.Fprintf(w, "\nProblems (reported, not fatal):\n")
		for _, p := range t.Problems {
			fmt.Fprintf(w, "  %-18s %s\n", p.Kind, p.Detail)
		}
	}
}

func renderNode(w io.Writer, n *tree.Node, first, rest string) {
	fmt.Fprintf(w, "%s%s  %s%s\n", first, n.ThreadID, n.Status, nodeDetail(n))
	for i, c := range n.Children {
		if i == len(n.Children)-1 {
			renderNode(w, c, rest+"└─ ", rest+"   ")
		} else {
			renderNode(w, c, rest+"├─ ", rest+"│  ")
		}
	}
}

func nodeDetail(n *tree.Node) string {
	var parts []string
	if n.AgentRole != "" {
		parts = append(parts, "role "+n.AgentRole)
	}
	switch {
	case n.RolloutID == "":
		parts = append(parts, "never wrote a line")
	case len(n.Rollouts) > 1:
		parts = append(parts, "rollouts "+strings.Join(n.Rollouts, " → "))
	default:
		parts = append(parts, "rollout "+n.RolloutID)
	}
	if n.ForkedFromID != "" && n.ParentThreadID == "" {
		parts = append(parts, "forked from "+n.ForkedFromID)
	}
	c := n.Counts
	if c.InterruptedTurns > 0 {
		parts = append(parts, plural(c.InterruptedTurns, "interrupted turn", "interrupted turns"))
	}
	if c.UnknownCalls > 0 {
		parts = append(parts, plural(c.UnknownCalls, "call unknown", "calls unknown"))
	}
	if c.DeliveriesUnconfirmed > 0 {
		parts = append(parts, plural(c.DeliveriesUnconfirmed, "delivery not confirmed", "deliveries not confirmed"))
	}
	if n.Unconfirmed > 0 {
		parts = append(parts, plural(n.Unconfirmed, "child result unconfirmed", "child results unconfirmed"))
	}
	return "  (" + strings.Join(parts, "; ") + ")"
}
