package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func newWorldCmd() *cobra.Command {
	var cf connFlags
	var ledgerPath string
	cmd := &cobra.Command{
		Use:   "world --nats URL --ledger FILE",
		Short: "Serve the simulated outside world: side effects by idempotency key, probes, ground truth",
		Long: `world serves the simulated outside world on the bus (NATS request/reply on
sim.world.*, outside Logbook's streams). It carries out each side effect once
per idempotency key (a repeated request is answered without a second
execution, and counted), answers the workers' probes ("was this key
executed?") for their resumes, and collects each thread's report of what it
did. Its ledger FILE (JSON lines, fsynced before every answer) is the ground
truth agent-sim checks Logbook against; keep it outside the coordinator's
data dir. A restarted world reloads it.`,
		Example: `  agent-sim world --nats nats://127.0.0.1:4222 --ledger /tmp/world.jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.check(); err != nil {
				return err
			}
			if ledgerPath == "" {
				return usageError{errors.New("--ledger FILE is required")}
			}
			w, err := openWorld(ledgerPath)
			if err != nil {
				return err
			}
			defer w.file.Close()
			c, err := cf.connect(cmd.Context(), "agent-sim world", logger(cmd.ErrOrStderr(), cf.verbose))
			if err != nil {
				return err
			}
			defer c.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "world serving on %s, ledger %s (%d effects)\n", cf.url, ledgerPath, len(w.effects))
			return serveWorld(cmd.Context(), c.Conn(), w)
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&ledgerPath, "ledger", "", "the world's ledger `FILE` (required)")
	return cmd
}
