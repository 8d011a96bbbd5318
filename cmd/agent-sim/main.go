// Command agent-sim runs simulated agent trees against a Logbook
// coordinator, using only the public agent package: workers of simulated
// agents, the simulated outside world they act on, and runs of whole trees
// with their ground truth.
//
// Its crash command (crash_*.go) is the crash campaign: it runs the
// coordinator, the world and workers as child processes, injects one fault
// a round, and checks DESIGN §8's invariants against the world's ledger,
// the workers' own --acks records and the tree's plan. Its checks read the
// data dir and the bus with the coordinator's own readers (internal/...),
// as an auditor would; the simulated agents stay on the public package.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks an error found before anything ran.
type usageError struct{ error }

func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	err := root.ExecuteContext(ctx)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue) || isCobraUsage(err):
		fmt.Fprintf(stderr, "agent-sim: %v (see agent-sim --help)\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "agent-sim: %v\n", err)
		return exitFail
	}
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires ", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "agent-sim",
		Short: "Run simulated agent trees against a Logbook coordinator",
		Long: `agent-sim runs simulated agents on a Logbook bus, through the public agent
package only.

  agent-sim world  --nats URL --ledger FILE   the simulated outside world
  agent-sim worker --nats URL [--id ID]       a worker running simulated agents
  agent-sim run    --nats URL --seed S ...    run one tree to completion
  agent-sim crash  --seed S --rounds R        a crash campaign: kill workers and the
                                              coordinator under live trees, check invariants
  agent-sim nats-node --name N --store DIR ... one JetStream cluster node (crash --cluster)

A coordinator must be serving the bus (coordinator serve): it sets the bus up
and offers runnable threads to the workers.

Exit status: 0 on success, 1 when something failed (one line on stderr), 2
for a usage error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newWorldCmd(), newWorkerCmd(), newRunCmd(), newCrashCmd(), newEnumerateCmd(), newNATSNodeCmd())
	return root
}

// logger writes warnings and errors to stderr (debug with --verbose).
func logger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
