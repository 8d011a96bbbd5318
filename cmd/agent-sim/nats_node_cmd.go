package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/stream"
)

type natsNodeFlags struct {
	name, listen, clusterListen, clusterName, routes, store, addrFile, fsync string
}

func newNATSNodeCmd() *cobra.Command {
	var f natsNodeFlags
	cmd := &cobra.Command{
		Use:   "nats-node --name N --store DIR --routes URLS [--listen ADDR] [--cluster-listen ADDR] [--addr-file FILE]",
		Short: "Run one node of a JetStream cluster (an embedded nats-server): what crash --cluster kills",
		Long: `nats-node runs one JetStream cluster node: an embedded nats-server with
JetStream, its store in --store, its client and route listeners on --listen
and --cluster-listen (port 0: the OS picks), routes to the other nodes'
route listeners (--routes, comma-separated nats://host:port; nodes learn of
each other through them, so each node needs one it can reach, or will).

Once it serves, it writes its client URL and its route URL, one a line, to
--addr-file (atomically), so whoever started it reads the ports the OS
chose. SIGTERM or SIGINT stops it cleanly; SIGKILL is what crash --cluster
does to a stream leader, and a node restarted on the same store, ports and
routes catches up from its peers.

--fsync always (the default) fsyncs every message before it is acknowledged,
as the coordinator's embedded server does; interval leaves it to the
server's sync interval (two minutes), where an acknowledged message survives
a node's death only on the other nodes.`,
		Example: `  agent-sim nats-node --name n1 --store /tmp/n1 --routes nats://127.0.0.1:6222 --addr-file /tmp/n1.addr`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.name == "" || f.store == "" || f.routes == "" {
				return usageError{errors.New("--name, --store and --routes are required")}
			}
			if f.fsync != stream.FsyncAlways && f.fsync != stream.FsyncInterval {
				return usageError{fmt.Errorf("--fsync %q: want %s or %s", f.fsync, stream.FsyncAlways, stream.FsyncInterval)}
			}
			ns, err := stream.StartServer(stream.ServerConfig{
				Name: f.name, StoreDir: f.store, Listen: f.listen, Fsync: f.fsync,
				Logger:  logger(cmd.ErrOrStderr(), false),
				Cluster: &stream.ClusterConfig{Name: f.clusterName, Listen: f.clusterListen, Routes: strings.Split(f.routes, ",")},
			})
			if err != nil {
				return err
			}
			defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
			addrs := ns.ClientURL() + "\n" + "nats://" + ns.ClusterAddr().String() + "\n"
			if f.addrFile != "" {
				if err := writeAtomic(f.addrFile, []byte(addrs)); err != nil {
					return fmt.Errorf("--addr-file: %w", err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "nats-node %s serving clients on %s, routes on nats://%s\n", f.name, ns.ClientURL(), ns.ClusterAddr())
			<-cmd.Context().Done()
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "the node's server `NAME`, unique in the cluster (required)")
	fl.StringVar(&f.store, "store", "", "the JetStream store `DIR` (required; keep it across restarts)")
	fl.StringVar(&f.routes, "routes", "", "the other nodes' route `URLS`, comma-separated nats://host:port (required)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "the client listener `ADDR`")
	fl.StringVar(&f.clusterListen, "cluster-listen", "127.0.0.1:0", "the route listener `ADDR`")
	fl.StringVar(&f.clusterName, "cluster-name", "logbook-sim", "the cluster's `NAME`, the same on every node")
	fl.StringVar(&f.addrFile, "addr-file", "", "write the client and route URLs to `FILE` once serving")
	fl.StringVar(&f.fsync, "fsync", stream.FsyncAlways, "always or interval (see above)")
	return cmd
}

// writeAtomic writes b to path through a temporary file and a rename, so a
// reader sees all of it or nothing.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
