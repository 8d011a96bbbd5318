package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
	"github.com/logbook-agents/logbook/internal/stream/serve"
)

func newServeCmd() *cobra.Command {
	var cfg serve.Config
	var creds stream.Credentials
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the coordinator: the JetStream bus (embedded by default) for a data dir",
		Long: `Serve runs the coordinator for one data dir (--data, else $LOGBOOK_DATA,
else ~/.logbook). It embeds a nats-server with JetStream (store DATA/nats,
client address --nats-listen) unless --nats names a server or cluster to use,
creates the ROLLOUTS and MAIL streams and the THREADS and LEASES buckets if
they are missing, writes the client URL to DATA/nats.url, prints it, and
serves GET /healthz and GET /status on --listen.

It mirrors every rollout to DATA/rollouts/<rollout_id>.jsonl (fsynced before
its watermark DATA/mirror.state moves), refuses what is not a valid rollout
record into DATA/quarantine/, compresses rollouts idle for --cold-after to
.jsonl.zst, and keeps the index (DATA/index.db) caught up behind the mirror.

--fsync always (the default) fsyncs every message before the bus acknowledges
it: an acknowledged record survives a power loss. --fsync interval fsyncs
every 2 minutes: an acknowledged record survives a crash of the process but a
power loss may lose the last 2 minutes. See docs/DURABILITY.md.

One coordinator per data dir: a second one exits with one line naming the
holder of DATA/LOCK. SIGINT or SIGTERM stop it cleanly.

Exit status: 0 after a clean stop (SIGINT or SIGTERM), 1 when it cannot start
(the data dir is locked, a port is busy, a stream or bucket exists with
another configuration) or fails, 2 for a usage error.`,
		Example: `  coordinator serve
  coordinator serve --data /var/lib/logbook --nats-listen 127.0.0.1:0 --listen 127.0.0.1:0
  coordinator serve --nats nats://n1:4222,nats://n2:4222,nats://n3:4222 --replicas 3  # not run here: needs a 3-node cluster`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("serve takes no arguments, got %q", args)
			}
			if cfg.NATSURL != "" && cmd.Flags().Changed("fsync") {
				return errors.New("--fsync applies to the embedded server; with --nats, durability is the server's sync_interval setting")
			}
			if cfg.NATSURL != "" && cmd.Flags().Changed("nats-listen") {
				return errors.New("--nats-listen applies to the embedded server; with --nats nothing is embedded")
			}
			if cfg.Fsync != stream.FsyncAlways && cfg.Fsync != stream.FsyncInterval {
				return fmt.Errorf("--fsync %q: want always or interval", cfg.Fsync)
			}
			if cfg.Replicas < 1 {
				return fmt.Errorf("--replicas %d: want 1 or more", cfg.Replicas)
			}
			if cfg.LeaseTTL < time.Second {
				return fmt.Errorf("--lease-ttl %s: want 1s or more", cfg.LeaseTTL)
			}
			if cfg.NATSURL == "" && creds.Given() {
				return errors.New("--creds, --nkey, --user, --password and --token are for --nats; the embedded server's users are --auth FILE")
			}
			if cfg.NATSURL != "" && cfg.Security.AuthFile != "" {
				return errors.New("--auth configures the embedded server; with --nats, users are the cluster's configuration (see deploy/nats-cluster)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.DataDir == "" {
				dir, err := defaultDataDir()
				if err != nil {
					return err
				}
				cfg.DataDir = dir
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cfg.ColdAfter == 0 {
				cfg.ColdAfter = -1 // --cold-after 0s: never
			}
			if cfg.NATSURL == "" {
				// The embedded server's own certificate, key and client CA.
				cfg.Security.TLSCert, cfg.Security.TLSKey, cfg.Security.TLSCA = creds.TLSCert, creds.TLSKey, creds.TLSCA
			} else {
				cfg.Security.Client = withEnv(creds)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			cfg.Stdout = cmd.OutOrStdout()
			return serve.Run(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data", "", "data dir `DIR` (default $LOGBOOK_DATA, else ~/.logbook)")
	f.StringVar(&cfg.NATSURL, "nats", "", "use the NATS server or cluster at `URL` (several comma-separated) instead of embedding one")
	f.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "client address `HOST:PORT` of the embedded server (port 0: random)")
	f.IntVar(&cfg.Replicas, "replicas", 1, "`N` replicas of the streams and buckets (more than 1 needs --nats)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7420", "HTTP address `HOST:PORT` (port 0: random)")
	f.DurationVar(&cfg.ColdAfter, "cold-after", mirror.DefaultColdAfter, "compress a rollout's mirror file once it is idle for `D` (0s: never)")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", stream.DefaultLeaseTTL, "how long `D` a writer's lease and a worker's heartbeat live without renewal: the longest a dead agent's thread waits for another worker (fixed when the bus is first set up)")
	f.StringVar(&cfg.Fsync, "fsync", stream.FsyncAlways, "`MODE`: always fsyncs before every ack, interval every 2 minutes (see docs/DURABILITY.md)")
	f.StringVar(&cfg.Security.AuthFile, "auth", "", "users `FILE` of the embedded server (JSON, see docs/SECURITY.md); needed to listen beyond loopback")
	f.StringVar(&cfg.Security.HTTPTokenFile, "http-token", "", "`FILE` holding the bearer token the HTTP API requires; needed to --listen beyond loopback")
	addCredFlags(f, &creds)
	f.Lookup("tls-cert").Usage = "PEM certificate `FILE`: the embedded server's (clients connect with TLS), or with --nats the client certificate"
	f.Lookup("tls-key").Usage = "PEM key `FILE` of --tls-cert"
	f.Lookup("tls-ca").Usage = "PEM CA `FILE`: with the embedded server, client certificates must chain to it (mutual TLS); with --nats, the cluster's certificates must"
	return cmd
}

// defaultDataDir is $LOGBOOK_DATA, else ~/.logbook.
func defaultDataDir() (string, error) {
	if d := os.Getenv("LOGBOOK_DATA"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --data, no $LOGBOOK_DATA and no home directory: %w", err)
	}
	return filepath.Join(home, ".logbook"), nil
}
