package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
)

// Helpers of the commands that work on a data dir (threads, show, reindex,
// verify --data): the --data flag, opening the index for reading, the LOCK.

// addDataFlag adds --data DIR to cmd; resolveDataDir gives its default.
func addDataFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "data", "", "the data dir `DIR` (default $LOGBOOK_DATA, else ~/.logbook); served by a coordinator or not")
}

// resolveDataDir returns dir, or the default data dir when it is "", and
// checks that it is a directory.
func resolveDataDir(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = defaultDataDir(); err != nil {
			return "", err
		}
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s: no such data dir (set --data or $LOGBOOK_DATA)", dir)
	}
	return dir, nil
}

// openReader opens a data dir's index read-only, with errors that say what
// to do.
func openReader(ctx context.Context, dir string) (*index.Reader, error) {
	r, err := index.OpenReader(ctx, datadir.IndexPath(dir))
	switch {
	case errors.Is(err, index.ErrNoIndex):
		return nil, fmt.Errorf("%s has no index yet (%s); build it with: coordinator reindex --data %s", dir, datadir.Index, dir)
	case errors.Is(err, index.ErrSchema):
		return nil, fmt.Errorf("%v; rebuild it with: coordinator reindex --data %s", err, dir)
	}
	return r, err
}

// isTerminal reports whether w is a terminal (progress bars go only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
