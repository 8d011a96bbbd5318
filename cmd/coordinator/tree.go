package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/tree"
)

func newTreeCmd() *cobra.Command {
	var src sourceFlags
	var pf pageFlags
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

With --data the answer comes from the data dir's index, which keeps the
lineage as it indexes the mirror (a query, not a replay of every file); a data
dir without an index is read file by file, as --rollouts reads any directory.
Both give the same tree (verify --data checks it).

With THREAD (or --thread), only that thread's subtree is shown. --state,
--limit or --after list the nodes instead, one a line in tree order with their
depth, a page at a time: --state keeps the nodes in that state, --limit N
ends a page after N nodes with the cursor of the next (--after); orphans and
problems come with the first page.

Exit status: 0 when the tree was built (problems in the input are reported,
not fatal), 1 when the directory or the index cannot be read, THREAD is not
there or the cursor is not valid, 2 for a usage error.`,
		Example: `  coordinator tree --rollouts ~/.codex/sessions
  coordinator tree --data /var/lib/logbook release-P --json
  coordinator tree --data /var/lib/logbook --state needs_attention --limit 50`,
		Args: pf.args(&src),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t *tree.Tree
			var err error
			root := ""
			if pf.thread == "" {
				t, err = src.lineage(cmd.Context())
			} else if t, err = src.subtree(cmd.Context(), pf.thread); err == nil {
				root = t.Roots[0].ThreadID
			} else if errors.Is(err, tree.ErrUnknownThread) || errors.Is(err, tree.ErrAmbiguousThread) {
				err = fmt.Errorf("%w (tree without THREAD lists them all)", err)
			}
			if err != nil {
				return err
			}
			roots := t.Roots
			if !pf.paged() {
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), treeOf(t, roots))
				}
				renderTree(cmd.OutOrStdout(), t, roots)
				return nil
			}
			page, err := t.Page(tree.PageQuery{Root: root, State: pf.state, Limit: pf.limit, After: pf.after})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), treePageOf(t, page, pf.after == ""))
			}
			renderTreePage(cmd.OutOrStdout(), t, page, pf.after == "", pf.nextHint("tree", &src, page.NextCursor))
			return nil
		},
	}
	src.register(cmd)
	pf.register(cmd, tree.Active, tree.NeedsAttention, tree.Idle)
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
	renderProblems(w, t)
}

func renderProblems(w io.Writer, t *tree.Tree) {
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

// renderTreePage prints a page of nodes, indented by depth, with the
// orphans and problems on the first page and the next page's command.
func renderTreePage(w io.Writer, t *tree.Tree, page tree.Page, first bool, next string) {
	if len(page.Nodes) == 0 {
		fmt.Fprintln(w, "no threads")
	}
	for _, n := range page.Nodes {
		fmt.Fprintf(w, "%s%s  %s%s\n", strings.Repeat("  ", n.Depth), n.ThreadID, n.Status, nodeDetail(n.Node))
	}
	if first {
		renderProblems(w, t)
	}
	if page.NextCursor != "" {
		fmt.Fprintf(w, "\n%s; next page: %s\n", plural(len(page.Nodes), "thread", "threads"), next)
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
