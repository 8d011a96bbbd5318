package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/stream/serve"
)

func newReindexCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild a data dir's index from its mirror files",
		Long: `Reindex rebuilds the data dir's SQLite index (index.db) from its mirror
files (rollouts/*.jsonl and *.jsonl.zst), the truth it projects. It builds the
new index beside the old one and swaps it in with one rename once complete:
a crash or an interrupt at any point leaves the old index usable, and readers
(threads, show) keep working meanwhile.

A coordinator serving the data dir keeps its own index current; reindex
refuses to run while one holds the data dir's LOCK. On a terminal a progress
bar shows the bytes of mirror files read.

A mirror file damaged in the middle is indexed up to the damage and reported
(coordinator verify --data DIR names the line); the others are indexed whole.

Exit status: 0 when the new index is in place (a warning names the rollouts
indexed only in part), 1 when it could not be built or swapped in (the old
one stays), 2 for a usage error.`,
		Example: `  coordinator reindex
  coordinator reindex --data /srv/logbook`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReindex(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), dir)
		},
	}
	addDataFlag(cmd, &dir)
	return cmd
}

func runReindex(ctx context.Context, w, stderr io.Writer, dir string) error {
	dir, err := resolveDataDir(dir)
	if err != nil {
		return err
	}
	files, err := datadir.MirrorFiles(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	// index.db has one writer: a serving coordinator, or this command.
	lock, err := serve.TakeLock(dir)
	if err != nil {
		return fmt.Errorf("%w; stop the coordinator serving %s first (it keeps its own index current)", err, dir)
	}
	defer lock.Release()
	var total int64
	for _, f := range files {
		total += f.Size
	}
	var progress index.Progress
	var bar *progressbar.ProgressBar
	if isTerminal(stderr) {
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("reindex"),
			progressbar.OptionShowBytes(true), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(), progressbar.OptionFullWidth())
		progress = func(b int64, records int) {
			bar.Describe(fmt.Sprintf("reindex: %s records", num(int64(records))))
			bar.Set64(b)
		}
	}
	start := time.Now()
	rep, err := index.Rebuild(ctx, dir, index.Options{}, progress)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return fmt.Errorf("reindex %s: %w (the previous index, if any, is unchanged)", dir, err)
	}
	took := time.Since(start)
	rate := float64(rep.Records) / max(took.Seconds(), 1e-9)
	fmt.Fprintf(w, "Reindexed %s: %s, %s in %s (%s records/s)\n", dir, plural(rep.Rollouts, "rollout", "rollouts"),
		plural(rep.Records, "record", "records"), took.Round(time.Millisecond), num(int64(rate)))
	for _, p := range rep.Problems {
		fmt.Fprintf(stderr, "coordinator: warning: %s\n", oneLine(p.Error()))
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(stderr, "coordinator: warning: %s indexed only in part; coordinator verify --data %s checks the mirror files\n",
			plural(len(rep.Problems), "rollout", "rollouts"), dir)
	}
	return nil
}
