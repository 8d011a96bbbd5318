package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/faults"
)

func pointList() string {
	names := make([]string, 0, len(crashPoints))
	for p := range crashPoints {
		names = append(names, p)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// parseCrashFlag reads --crash POINT[:N].
func parseCrashFlag(v string) (string, int64, error) {
	if v == "" {
		return "", 0, nil
	}
	point, n, found := strings.Cut(v, ":")
	hit := int64(1)
	if found {
		h, err := strconv.ParseInt(n, 10, 64)
		if err != nil || h < 1 {
			return "", 0, fmt.Errorf("--crash %q: want POINT[:N] with N >= 1", v)
		}
		hit = h
	}
	if _, ok := crashPoints[point]; !ok {
		return "", 0, fmt.Errorf("--crash %q: not a crash point (%s)", v, pointList())
	}
	return point, hit, nil
}

func newWorkerCmd() *cobra.Command {
	var cf connFlags
	var id string
	var capacity int
	var think time.Duration
	var crashAt, crashToken, acksPath string
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
			if think < 0 {
				return usageError{fmt.Errorf("--think %s: want 0 or more", think)}
			}
			point, hit, err := parseCrashFlag(crashAt)
			if err != nil {
				return usageError{err}
			}
			acks, err := openAckLog(acksPath)
			if err != nil {
				return err
			}
			if name, ok := protocolPoints[point]; ok {
				faults.Arm(name, hit, func(name string) {
					if takeToken(crashToken) {
						fmt.Fprintf(os.Stderr, "faults: crash point %s reached: SIGKILL\n", name)
						syscall.Kill(os.Getpid(), syscall.SIGKILL)
						select {}
					}
				})
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
			sim := &simAgent{world: &worldClient{nc: c.Conn(), timeout: 5 * time.Second}, log: log, crashAt: point, crashHit: hit, crashToken: crashToken, acks: acks, think: think}
			fmt.Fprintf(cmd.OutOrStdout(), "worker %s running (capacity %d)\n", id, capacity)
			return c.RunWorker(cmd.Context(), agent.WorkerSpec{ID: id, Capacity: capacity, Prober: sim.world, RetryProvenNotExecuted: true}, sim.handle)
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&id, "id", "", "the worker's `ID` (default sim-<host>-<pid>)")
	cmd.Flags().IntVar(&capacity, "capacity", 4, "threads run at once")
	cmd.Flags().DurationVar(&think, "think", 0, "each turn thinks this `LONG` before it acts, as a model does (its thread's lease is renewed meanwhile)")
	cmd.Flags().StringVar(&crashAt, "crash", "", "SIGKILL this worker the Nth time (default 1) it reaches crash `POINT[:N]` ("+pointList()+")")
	cmd.Flags().StringVar(&crashToken, "crash-token", "", "with --crash: die only if `FILE` can be created (of several workers armed with one token, the first to reach the point)")
	cmd.Flags().StringVar(&acksPath, "acks", "", "append the worker's own record of what the bus acknowledged to `FILE` (agent-sim crash reads it)")
	return cmd
}
