package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/tree"
)

// sourceFlags choose where lineage commands read rollouts: any directory of
// rollout files (--rollouts, the full scan: every file read and replayed),
// or a data dir (--data): its index, which holds the lineage and the
// delivery ledger as projections, else (no index yet, or one of another
// schema) the full scan of its mirror files.
type sourceFlags struct {
	rollouts string
	data     string
	cmd      *cobra.Command // where load's warnings go (its stderr)
}

func (f *sourceFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVar(&f.rollouts, "rollouts", "", "read every rollout file under `DIR` (recursive; .jsonl and .jsonl.zst), e.g. ~/.codex/sessions; no server, no index")
	cmd.Flags().StringVar(&f.data, "data", "", "answer from a data dir's index (`DIR`/index.db; its mirror files when it has none); default $LOGBOOK_DATA, else ~/.logbook")
}

// check rejects --rollouts together with --data (a usage error).
func (f *sourceFlags) check() error {
	if f.rollouts != "" && f.data != "" {
		return errors.New("give --rollouts or --data, not both")
	}
	return nil
}

func (f *sourceFlags) warn(format string, args ...any) {
	if f.cmd != nil {
		fmt.Fprintf(f.cmd.ErrOrStderr(), "warning: "+format+"\n", args...)
	}
}

// dataDir is the data dir --data names (or the default one).
func (f *sourceFlags) dataDir() (string, error) {
	if f.data != "" {
		return f.data, nil
	}
	return defaultDataDir()
}

// index opens the data dir's index for reading; nil (and no error) when the
// answer must come from the full scan: --rollouts, or a data dir whose
// index is missing or of another schema (said on stderr).
func (f *sourceFlags) index(ctx context.Context) (*index.Reader, string, error) {
	if f.rollouts != "" {
		return nil, "", nil
	}
	dir, err := f.dataDir()
	if err != nil {
		return nil, "", err
	}
	r, err := index.OpenReader(ctx, datadir.IndexPath(dir))
	switch {
	case errors.Is(err, index.ErrNoIndex), errors.Is(err, index.ErrSchema):
		if st, serr := os.Stat(datadir.RolloutsDir(dir)); serr == nil && st.IsDir() {
			f.warn("%v; reading every mirror file instead (coordinator reindex --data %s builds the index)", err, dir)
		}
		return nil, dir, nil
	case err != nil:
		return nil, "", err
	}
	return r, dir, nil
}

// load reads the chosen rollouts into a corpus (the full scan).
func (f *sourceFlags) load() (*tree.Corpus, string, error) {
	if err := f.check(); err != nil {
		return nil, "", err
	}
	dir := f.rollouts
	if dir == "" {
		data, err := f.dataDir()
		if err != nil {
			return nil, "", err
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
	for _, w := range c.Warnings {
		f.warn("%s", w)
	}
	return c, dir, nil
}

// leases returns, for a data dir whose coordinator is serving, a check of
// which threads hold a live lease, from one read of every lease; nil
// offline (no thread is active then). It never fails the command: an
// unreachable bus just means "not known".
func (f *sourceFlags) leases(ctx context.Context) func(string) bool {
	if f.rollouts != "" {
		return nil
	}
	bf := busFlags{data: f.data}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	bus, closeBus, err := bf.connect(ctx)
	if err != nil {
		return nil
	}
	defer closeBus()
	all, err := bus.Leases(ctx)
	if err != nil {
		return nil
	}
	now := time.Now()
	return func(thread string) bool {
		l, ok := all[thread]
		return ok && now.Before(l.Expires)
	}
}

// build reads the chosen rollouts and builds their tree (the full scan),
// with live leases when a coordinator serves the data dir.
func (f *sourceFlags) build(ctx context.Context) (*tree.Tree, error) {
	c, _, err := f.load()
	if err != nil {
		return nil, err
	}
	return tree.Build(c, tree.Options{Active: f.leases(ctx)}), nil
}

// treeOfCorpus builds a corpus's tree with no leases (the ledger needs none).
func treeOfCorpus(c *tree.Corpus) *tree.Tree { return tree.Build(c, tree.Options{}) }

// lineage builds the tree from the data dir's index when it has one, else
// by the full scan.
func (f *sourceFlags) lineage(ctx context.Context) (*tree.Tree, error) {
	r, dir, err := f.index(ctx)
	if err != nil || r == nil {
		if err != nil {
			return nil, err
		}
		return f.build(ctx)
	}
	defer r.Close()
	in, err := r.Lineage(ctx, dir)
	if err != nil {
		return nil, err
	}
	return tree.Assemble(in, tree.Options{Active: f.leases(ctx)}), nil
}

// subtree builds the subtree of thread id (an id or a unique prefix): from
// the data dir's index when it has one (the outline of every thread and the
// subtree's own rows), else by the full scan. The tree holds the subtree as
// its only root, with the whole tree's orphans and problems.
func (f *sourceFlags) subtree(ctx context.Context, id string) (*tree.Tree, error) {
	r, dir, err := f.index(ctx)
	if err != nil {
		return nil, err
	}
	if r == nil {
		t, err := f.build(ctx)
		if err != nil {
			return nil, err
		}
		n, err := t.Find(id)
		if err != nil {
			return nil, err
		}
		t.Roots = []*tree.Node{n}
		return t, nil
	}
	defer r.Close()
	return r.Subtree(ctx, dir, id, tree.Options{Active: f.leases(ctx)})
}

// pageFlags page and filter a lineage command's output.
type pageFlags struct {
	thread, state, after string
	limit                int
	states               []string // what --state may name
}

func (p *pageFlags) register(cmd *cobra.Command, states ...string) {
	p.states = states
	cmd.Flags().StringVar(&p.thread, "thread", "", "only `THREAD` (an id or a unique prefix); the same as the THREAD argument")
	cmd.Flags().StringVar(&p.state, "state", "", "only what is in `STATE` ("+strings.Join(states, ", ")+")")
	cmd.Flags().IntVar(&p.limit, "limit", 0, "at most `N` per page (0: no limit); the output ends with the next page's cursor")
	cmd.Flags().StringVar(&p.after, "after", "", "the page after `CURSOR`, as the previous page printed it (with the same THREAD and --state)")
}

// check merges a THREAD argument into --thread.
func (p *pageFlags) check(args []string) error {
	if len(args) == 1 {
		if p.thread != "" && p.thread != args[0] {
			return fmt.Errorf("THREAD %s and --thread %s name different threads: give one", args[0], p.thread)
		}
		p.thread = args[0]
	}
	if p.limit < 0 {
		return fmt.Errorf("--limit %d: must be 0 (no limit) or more", p.limit)
	}
	if p.state != "" && !slices.Contains(p.states, p.state) {
		return fmt.Errorf("--state %s: use one of %s", p.state, strings.Join(p.states, ", "))
	}
	return nil
}

// args accepts an optional THREAD and checks the flags: what they reject
// is a usage error.
func (p *pageFlags) args(src *sourceFlags) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
			return err
		}
		if err := src.check(); err != nil {
			return err
		}
		return p.check(args)
	}
}

func (p *pageFlags) paged() bool { return p.limit > 0 || p.after != "" || p.state != "" }

// nextHint is the command line of the next page.
func (p *pageFlags) nextHint(name string, src *sourceFlags, cursor string) string {
	s := "coordinator " + name
	if src.rollouts != "" {
		s += " --rollouts " + src.rollouts
	}
	if src.data != "" {
		s += " --data " + src.data
	}
	if p.thread != "" {
		s += " --thread " + p.thread
	}
	if p.state != "" {
		s += " --state " + p.state
	}
	if p.limit > 0 {
		s += fmt.Sprintf(" --limit %d", p.limit)
	}
	return s + " --after " + cursor
}
