package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/stream"
)

// workerJSON is one worker in `workers --json`.
type workerJSON struct {
	ID        string   `json:"id"`
	Host      string   `json:"host"`
	PID       int      `json:"pid"`
	Capacity  int      `json:"capacity"`
	Threads   []string `json:"threads"`
	Started   string   `json:"started"`
	Heartbeat string   `json:"heartbeat"`
	State     string   `json:"state"` // live, stopping
}

func newWorkersCmd() *cobra.Command {
	var bf busFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the live workers, the threads each holds and their last heartbeat",
		Long: `workers lists the worker processes whose heartbeat has not expired (a
heartbeat lives one lease TTL): their id, host and pid, capacity, the threads
they hold now, when they started and when they last beat. State is live, or
stopping for a worker that announced a clean stop. A worker that stopped
beating without one is dead: it is no longer listed, and the coordinator
offers its threads to the other workers.

Needs a serving coordinator (the bus). Exit status: 0, 1 on an error.`,
		Example: `  coordinator workers
  coordinator workers --json`,
		Args: checkedArgs(cobra.NoArgs, bf.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, bus, done, err := bf.open(cmd, bf.timeout)
			if err != nil {
				return err
			}
			defer done()
			ws, err := bus.Workers(ctx)
			if err != nil {
				return err
			}
			out := make([]workerJSON, 0, len(ws))
			for _, w := range ws {
				out = append(out, workerOf(w))
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					Workers []workerJSON `json:"workers"`
				}{out})
			}
			if len(out) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No live workers.")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKER\tHOST\tPID\tTHREADS\tHEARTBEAT\tSTATE")
			for _, w := range out {
				threads := "-"
				if len(w.Threads) > 0 {
					threads = fmt.Sprintf("%d/%d %s", len(w.Threads), w.Capacity, strings.Join(w.Threads, ","))
				} else {
					threads = fmt.Sprintf("0/%d", w.Capacity)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", w.ID, w.Host, w.PID, threads, ago(w.Heartbeat), w.State)
			}
			return tw.Flush()
		},
	}
	bf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workers as JSON")
	return cmd
}

func workerOf(w stream.WorkerInfo) workerJSON {
	state := "live"
	if w.Stopped {
		state = "stopping"
	}
	threads := w.Threads
	if threads == nil {
		threads = []string{}
	}
	return workerJSON{ID: w.ID, Host: w.Host, PID: w.PID, Capacity: w.Capacity, Threads: threads, Started: w.Started, Heartbeat: w.Beat, State: state}
}

// ago renders an RFC 3339 time as how long ago it was, with the time (UTC).
func ago(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return fmt.Sprintf("%s ago (%s)", time.Since(t).Round(100*time.Millisecond), t.UTC().Format("15:04:05Z"))
}
