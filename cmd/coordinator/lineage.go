package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/tree"
)

// sourceFlags choose where lineage commands read rollouts: any directory of
// rollout files (--rollouts), or a data dir's mirror (--data).
type sourceFlags struct {
	rollouts string
	data     string
	cmd      *cobra.Command // where load's warnings go (its stderr)
}

func (f *sourceFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVar(&f.rollouts, "rollouts", "", "read every rollout file under `DIR` (recursive; .jsonl and .jsonl.zst), e.g. ~/.codex/sessions; no server, no index")
	cmd.Flags().StringVar(&f.data, "data", "", "read a data dir's mirror (`DIR`/rollouts); default $LOGBOOK_DATA, else ~/.logbook")
}

// check rejects --rollouts together with --data (a usage error).
func (f *sourceFlags) check() error {
	if f.rollouts != "" && f.data != "" {
		return errors.New("give --rollouts or --data, not both")
	}
	return nil
}

// load reads the chosen rollouts into a corpus.
func (f *sourceFlags) load() (*tree.Corpus, string, error) {
	if err := f.check(); err != nil {
		return nil, "", err
	}
	dir := f.rollouts
	if dir == "" {
		data := f.data
		if data == "" {
			var err error
			if data, err = defaultDataDir(); err != nil {
				return nil, "", err
			}
		}
		dir = datadir.RolloutsDir(data)
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist) && f.rollouts == "":
		return nil, "", fmt.Errorf("%s: no such directory: is this a data dir? (use --data DIR, or --rollouts DIR for any directory of rollout files)", dir)
	case err != nil:
		return nil, "", fmt.Errorf("%s: %w", dir, errors.Unwrap(err))
	case !st.IsDir():
		return nil, "", fmt.Errorf("%s: not a directory", dir)
	}
	c, err := tree.LoadDir(dir)
	if err != nil {
		return nil, "", err
	}
	if f.cmd != nil {
		for _, w := range c.Warnings {
			fmt.Fprintln(f.cmd.ErrOrStderr(), "warning:", w)
		}
	}
	return c, dir, nil
}

// leases returns, for a data dir whose coordinator is serving, a check of
// which threads hold a live lease; nil offline (no thread is active then).
// It never fails the command: an unreachable bus just means "not known".
func (f *sourceFlags) leases(ctx context.Context) (func(string) bool, func()) {
	if f.rollouts != "" {
		return nil, func() {}
	}
	bf := busFlags{data: f.data}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	bus, closeBus, err := bf.connect(ctx)
	if err != nil {
		return nil, func() {}
	}
	return func(thread string) bool {
		qctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := bus.ReadLease(qctx, thread)
		return err == nil && info != nil && time.Now().Before(info.Expires)
	}, closeBus
}

// build reads the chosen rollouts and builds their tree, with live leases
// when a coordinator serves the data dir.
func (f *sourceFlags) build(ctx context.Context) (*tree.Tree, error) {
	c, _, err := f.load()
	if err != nil {
		return nil, err
	}
	active, done := f.leases(ctx)
	defer done()
	return tree.Build(c, tree.Options{Active: active}), nil
}
