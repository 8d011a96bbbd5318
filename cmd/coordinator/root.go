package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Exit codes. Scripts rely on them: do not change their meaning.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime error, or verify found problems
	exitUsage   = 2 // an unknown command or flag, a wrong number of arguments
)

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return execute(ctx, newRootCmd(stdout, stderr), args)
}

// newRootCmd builds the command tree. Every command writes to stdout and
// stderr as given and keeps its flags in its own closure: there is no
// package state, so tests run the tree in-process.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "coordinator",
		Short: "Recover trees of AI agents from their append-only rollout logs",
		Long: `coordinator is Logbook's daemon and command line.

Every agent thread writes an append-only rollout: one JSON record per line
(.jsonl, or .jsonl.zst when compressed), the thread's canonical log of facts.
Replaying a rollout rebuilds what a new session starts from: the model history
in effect, settings, world state, turns and the calls whose outcome is unknown,
without re-running a single side effect.

Three kinds of command:
  on files, offline:      replay, verify; tree, unconfirmed and threads with --rollouts DIR
  on a data dir's mirror and index (a coordinator may or may not be serving it):
                          threads, show, tree, unconfirmed, reindex (not while serving),
                          verify --data (its check against the bus needs a serving coordinator)
  through the bus of a serving coordinator (DIR/nats.url, or --nats URL):
                          serve itself; import, fork, rollback, revert, resume, reconcile, gc,
                          workers
  credentials new makes a user of the bus (agent, operator, coordinator).
  completion SHELL prints a shell completion script (bash, zsh, fish, powershell).
Logbook v1 rollouts and Codex rollouts (version 0, as found under
~/.codex/sessions) are both read.

Exit status: 0 on success, 1 when a command fails or finds a problem (one line
on stderr says what and where), 2 for a usage error (unknown command or flag,
wrong arguments).`,
		Example: `  coordinator replay testdata/examples/mid-turn-compaction.jsonl
  coordinator verify testdata/examples/*.jsonl
  coordinator tree --rollouts ~/.codex/sessions
  coordinator serve --data /tmp/lb --nats-listen 127.0.0.1:0`,
		Version:       versionString(),
		SilenceErrors: true, // execute prints errors: one line, or a usage error
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("coordinator {{.Version}}\n")
	root.AddCommand(
		newReplayCmd(),
		newVerifyCmd(),
		newServeCmd(),
		newTreeCmd(),
		newUnconfirmedCmd(),
		newThreadsCmd(),
		newShowCmd(),
		newReindexCmd(),
		newForkCmd(),
		newRollbackCmd(),
		newRevertCmd(),
		newResumeCmd(),
		newReconcileCmd(),
		newGCCmd(),
		newImportCmd(),
		newWorkersCmd(),
		newCredentialsCmd(),
	)
	markRuntime(root)
	return root
}

// versionString names this build: the module version (a tag when installed
// with go install, "(devel)" for a local build), the newest rollout schema it
// reads and writes, and the Go toolchain.
func versionString() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("%s (rollout schema v%d, %s)", v, rollout.Version, runtime.Version())
}

// runError marks an error returned by a command that started running, as
// opposed to one cobra returns while parsing the command line.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// markRuntime wraps the run hooks of c and its subcommands so their errors
// are runError. Whatever else fails is the command line's fault (exit 2).
// newRootCmd calls it last, so commands added before it need nothing.
func markRuntime(c *cobra.Command) {
	wrap := func(f func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
		if f == nil {
			return nil
		}
		return func(cmd *cobra.Command, args []string) error {
			if err := f(cmd, args); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
	c.PersistentPreRunE = wrap(c.PersistentPreRunE)
	c.PreRunE = wrap(c.PreRunE)
	c.RunE = wrap(c.RunE)
	c.PostRunE = wrap(c.PostRunE)
	c.PersistentPostRunE = wrap(c.PersistentPostRunE)
	for _, sub := range c.Commands() {
		markRuntime(sub)
	}
}

// execute runs root on args and maps the outcome to an exit code. A runtime
// error is one line on stderr, "coordinator: <what>"; a usage error is
// cobra's message and a pointer to the help of the command it concerns.
func execute(ctx context.Context, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	stderr := root.ErrOrStderr()
	var re *runError
	if errors.As(err, &re) {
		fmt.Fprintf(stderr, "coordinator: %s\n", oneLine(re.err.Error()))
		return exitFailure
	}
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(stderr, "coordinator: %s\nRun '%s --help' for usage.\n", strings.TrimRight(err.Error(), "\n"), cmd.CommandPath())
	return exitUsage
}

// checkedArgs validates a command's arguments with args, then its flag values with
// each check, before the command runs: whatever they reject is a usage error
// (exit 2), like an unknown flag.
func checkedArgs(args cobra.PositionalArgs, checks ...func() error) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := args(cmd, a); err != nil {
			return err
		}
		for _, c := range checks {
			if err := c(); err != nil {
				return err
			}
		}
		return nil
	}
}

// oneFile accepts exactly one FILE argument.
func oneFile(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("%s needs a rollout FILE", cmd.Name())
	}
	return fmt.Errorf("%s takes one FILE, got %d: %s", cmd.Name(), len(args), strings.Join(args, " "))
}

// someFiles accepts one or more FILE arguments.
func someFiles(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s needs at least one rollout FILE", cmd.Name())
	}
	return nil
}
