package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/agent"
)

func pointList() string {
	names := make([]string, 0, len(crashPoints))
	for p := range crashPoints {
		names = append(names, p)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func newWorkerCmd() *cobra.Command {
	var cf connFlags
	var id string
	var capacity int
	var crashAt string
	cmd := &cobra.Command{
		Use:   "worker --nats URL [--id ID] [--capacity N]",
		Short: "Run simulated agents: whatever threads the coordinator offers",
		Long: `worker registers with the coordinator (a heartbeat in WORKERS) and runs the
simulated threads it is offered, at most --capacity at once, until SIGTERM or
SIGINT. Each thread is opened with agent.Client.Open (it takes the thread's
lease and resumes it, asking the world's probe about calls left without a
result), run by the simulated model until it waits for mail or is done, and
closed. A worker whose threads were taken over (it was stopped past its lease
TTL: a zombie) stops with a fencing error and exit status 1.`,
		Example: `  agent-sim worker --nats nats://127.0.0.1:4222 --id w1 --capacity 8`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.check(); err != nil {
				return err
			}
			if _, ok := crashPoints[crashAt]; crashAt != "" && !ok {
				return usageError{fmt.Errorf("--crash %q: not a crash point (%s)", crashAt, pointList())}
			}
			if id == "" {
				host, _ := os.Hostname()
				id = fmt.Sprintf("sim-%s-%d", host, os.Getpid())
			}
			log := logger(cmd.ErrOrStderr(), cf.verbose)
			c, err := cf.connect(cmd.Context(), id, log)
			if err != nil {
				return err
			}
			defer c.Close()
			sim := &simAgent{world: &worldClient{nc: c.Conn(), timeout: 5 * time.Second}, log: log, crashAt: crashAt}
			fmt.Fprintf(cmd.OutOrStdout(), "worker %s running (capacity %d)\n", id, capacity)
			return c.RunWorker(cmd.Context(), agent.WorkerSpec{ID: id, Capacity: capacity, Prober: sim.world, RetryProvenNotExecuted: true}, sim.handle)
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&id, "id", "", "the worker's `ID` (default sim-<host>-<pid>)")
	cmd.Flags().IntVar(&capacity, "capacity", 4, "threads run at once")
	cmd.Flags().StringVar(&crashAt, "crash", "", "SIGKILL this worker the first time it reaches crash `POINT` ("+pointList()+")")
	return cmd
}
