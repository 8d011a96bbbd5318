package main

import (
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream/serve"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

func newGCCmd() *cobra.Command {
	var bf busFlags
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove old rollouts nothing refers to",
		Long: `gc removes rollouts that are no longer any thread's current one and that no
other rollout refers to: rollouts sealed by a revert, and the rollouts of
reverts that lost a race. A rollout named by another's history_base (a fork by
reference, a revert) or fork_copy is kept. References are checked against
JetStream and the mirror's files, never against the index, which may lag.

A removed rollout is purged from the bus and its mirror files are deleted.
--dry-run lists what would go and removes nothing.

Needs the bus, and (without --dry-run) the data dir to itself: gc refuses
while a coordinator serves it, since it deletes mirror files. An embedded
server stops with its coordinator, so gc without --dry-run needs a NATS
server or cluster that runs on its own (--nats URL). Exit status: 0, 1 on an
error, 2 for a usage error.`,
		Example: `  coordinator gc --dry-run
  coordinator gc --data /var/lib/logbook --nats nats://n1:4222,nats://n2:4222,nats://n3:4222  # not run here: needs a cluster that outlives its coordinator`,
		Args: checkedArgs(cobra.NoArgs, bf.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, bus, done, err := bf.open(cmd, bf.timeout)
			if err != nil {
				return err
			}
			defer done()
			mirror := ""
			if dir, err := bf.dataDir(); err == nil {
				mirror = datadir.RolloutsDir(dir)
				if _, err := os.Stat(dir); err == nil && !dryRun {
					// gc deletes mirror files: never behind a serving coordinator's back.
					lock, err := serve.TakeLock(dir)
					if err != nil {
						return fmt.Errorf("%w; gc deletes mirror files, so stop the coordinator serving %s first (--dry-run works while it serves)", err, dir)
					}
					defer lock.Release()
				}
			}
			res, err := ops.GC(ctx, bus, mirror, dryRun)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(w, gcOf(res))
			}
			verb := "Removed"
			if dryRun {
				verb = "Would remove (dry run)"
			}
			fmt.Fprintf(w, "%s: %d rollouts\n", verb, len(res.Removed))
			for _, r := range res.Removed {
				fmt.Fprintf(w, "  %s (thread %s): %s\n", r.ID, orDash(r.Thread), r.Reason)
			}
			if len(res.Kept) > 0 {
				fmt.Fprintf(w, "Kept: %d old or unreadable rollouts\n", len(res.Kept))
				for _, r := range res.Kept {
					fmt.Fprintf(w, "  %s (thread %s): %s\n", r.ID, orDash(r.Thread), r.Reason)
				}
			}
			if res.SkippedPacks > 0 {
				fmt.Fprintf(w, "Skipped: %d damaged or foreign messages on the bus\n", res.SkippedPacks)
			}
			return nil
		},
	}
	bf.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed; remove nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newImportCmd() *cobra.Command {
	var bf busFlags
	var asJSON bool
	var parallel int
	cmd := &cobra.Command{
		Use:   "import DIR",
		Short: "Publish rollout files (Codex sessions included) into the bus",
		Long: `import publishes every rollout file under DIR (recursively; .jsonl and
.jsonl.zst) into the bus, such as a Codex sessions directory (~/.codex/sessions).
Each record gets its ordinal and crc; its payload bytes and unknown fields stay
exactly as they were. IDs are validated, transient events left out, damaged
lines skipped and counted.

Nothing is imported twice: a rollout already on the bus is compared record by
record and only a missing suffix is published; a rollout that differs from the
bus copy is reported and left alone. Each new thread's rollout is recorded in
THREADS. Files are imported --parallel at a time, the files of one thread one
after another under its lease; the results are listed in path order. A progress
bar shows on a terminal.

Needs the bus (a serving coordinator, or --nats). Exit status: 0 when every
file imported (or was already there), 1 when any file failed, 2 for a usage
error.`,
		Example: `  coordinator import ~/.codex/sessions`,
		Args:    checkedArgs(cobra.ExactArgs(1), bf.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, bus, done, err := bf.open(cmd, bf.timeout)
			if err != nil {
				return err
			}
			defer done()
			var bar *progressbar.ProgressBar
			progress := func(done, total int) {
				if bar == nil {
					bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
						progressbar.OptionSetDescription("importing"), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
				}
				bar.Set(done) //nolint:errcheck // a progress bar
			}
			if f, ok := cmd.ErrOrStderr().(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
				progress = nil
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel %d: want at least 1", parallel)
			}
			res, err := ops.ImportWith(ctx, bus, args[0], ops.ImportOptions{Holder: holder("import"), Progress: progress, Parallel: parallel})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			failed := 0
			for _, im := range res {
				if im.Err != "" {
					failed++
				}
			}
			if asJSON {
				if err := writeJSON(w, importOf(res)); err != nil {
					return err
				}
			} else {
				published, skipped := 0, 0
				for _, im := range res {
					switch {
					case im.Err != "":
						fmt.Fprintf(w, "failed  %s: %s\n", im.Path, im.Err)
					case im.Skipped != "":
						skipped++
					default:
						published += im.Published
						fmt.Fprintf(w, "ok      %s: thread %s, rollout %s, %s published", im.Path, im.Thread, im.Rollout, plural(im.Published, "record", "records"))
						if im.Damaged > 0 {
							fmt.Fprintf(w, " (%s skipped)", plural(im.Damaged, "damaged line", "damaged lines"))
						}
						if im.TornTail != "" {
							fmt.Fprintf(w, " (last line skipped as a torn tail: %s)", im.TornTail)
						}
						fmt.Fprintln(w)
					}
				}
				fmt.Fprintf(w, "%d files: %s published, %d already imported, %d failed\n", len(res), plural(published, "record", "records"), skipped, failed)
			}
			if failed > 0 {
				return fmt.Errorf("import: %d of %d files failed", failed, len(res))
			}
			return nil
		},
	}
	bf.register(cmd)
	// An import of many files needs longer than one write; --timeout still
	// bounds the whole command, never each retry.
	bf.timeout = 30 * time.Minute
	cmd.Flags().Lookup("timeout").DefValue = bf.timeout.String()
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one result per file as JSON")
	cmd.Flags().IntVar(&parallel, "parallel", ops.ImportParallel, "import `N` files at once (the files of one thread always one after another)")
	return cmd
}
