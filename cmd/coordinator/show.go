package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

type showFlags struct {
	data                string
	json, full, salvage bool
}

func newShowCmd() *cobra.Command {
	var fl showFlags
	cmd := &cobra.Command{
		Use:   "show THREAD",
		Short: "Rebuild a thread's state from its current rollout in a data dir",
		Long: `Show finds THREAD (its id, or a prefix naming one thread) in the data dir's
index and replays its current rollout from the mirror file, as replay does
for a file: identity, settings, world state, token usage, the model history
in effect, the turns of the current window, the calls whose outcome is
unknown, and warnings. --json prints exactly what replay --json prints.

The fast path reads the tail of the mirror file backward to the newest
checkpoint in effect (compressed rollouts too). The index's checkpoint
locator and turns are checked against what replay found: when they differ,
or the index lags the mirror, a warning on stderr says the index is stale
(coordinator reindex rebuilds it); the state shown comes from the mirror
either way.

Works whether or not a coordinator is serving the data dir.

Exit status: 0 when the state was rebuilt (warnings included), 1 when the
thread is unknown, its mirror file is missing, or it is damaged where it
matters (see replay --salvage), 2 for a usage error.`,
		Example: `  coordinator show 019c8a59-e9dd-71f0-9ae3-4079fe9726a9
  coordinator show 019c8a59 --json
  coordinator show thread-A --data /srv/logbook --full`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch len(args) {
			case 1:
				return nil
			case 0:
				return fmt.Errorf("show needs a THREAD id (list them with coordinator threads)")
			}
			return fmt.Errorf("show takes one THREAD, got %d", len(args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShow(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], fl)
		},
	}
	f := cmd.Flags()
	addDataFlag(cmd, &fl.data)
	f.BoolVar(&fl.json, "json", false, "print the state as JSON, as replay --json does")
	f.BoolVar(&fl.full, "full", false, "list every history item and turn (default: the first 5 and the last 20)")
	f.BoolVar(&fl.salvage, "salvage", false, "skip damage inside the dependency region with a warning instead of failing")
	return cmd
}

func runShow(ctx context.Context, w, stderr io.Writer, id string, fl showFlags) error {
	var err error
	if fl.data, err = resolveDataDir(fl.data); err != nil {
		return err
	}
	r, err := openReader(ctx, fl.data)
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := index.Show(ctx, r, fl.data, id, replay.Options{Salvage: fl.salvage})
	switch {
	case errors.Is(err, index.ErrUnknownThread):
		return fmt.Errorf("no thread %s in %s; find it with: coordinator threads --data %s --search TEXT", id, fl.data, fl.data)
	case errors.Is(err, index.ErrAmbiguousThread):
		return fmt.Errorf("%v; give more of the id", err)
	case errors.Is(err, rollout.ErrNoSessionMeta):
		return fmt.Errorf("thread %s: %w", id, err)
	case err != nil:
		return err
	}
	for _, msg := range s.Stale {
		fmt.Fprintf(stderr, "coordinator: warning: %s; coordinator reindex --data %s rebuilds the index\n", oneLine(msg), fl.data)
	}
	if fl.json {
		out, err := s.State.MarshalIndent()
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	var buf bytes.Buffer
	source := fmt.Sprintf("thread %s, rollout %s (%s)", s.Thread.ID, s.Rollout.ID, s.Path)
	writeStateReport(&buf, source, s.State, fl.full)
	_, err = w.Write(buf.Bytes())
	return err
}
