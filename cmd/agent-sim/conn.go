package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/agent"
)

// connFlags are how a command reaches the bus, as the nats CLI takes them.
type connFlags struct {
	url                   string
	creds, nkey           string
	user, password, token string
	ca, cert, key         string
	verbose               bool
}

func (f *connFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.url, "nats", "", "the bus: NATS `URL` (comma-separated nodes of a cluster); required")
	fl.StringVar(&f.creds, "creds", "", "a .creds `FILE` (JWT and nkey seed)")
	fl.StringVar(&f.nkey, "nkey", "", "a `FILE` holding an nkey seed")
	fl.StringVar(&f.user, "user", "", "user name")
	fl.StringVar(&f.password, "password", "", "password")
	fl.StringVar(&f.token, "token", "", "authentication token")
	fl.StringVar(&f.ca, "tls-ca", "", "CA certificate `FILE` to verify the server")
	fl.StringVar(&f.cert, "tls-cert", "", "client certificate `FILE`")
	fl.StringVar(&f.key, "tls-key", "", "client key `FILE`")
	fl.BoolVar(&f.verbose, "verbose", false, "log debug messages to stderr")
}

func (f *connFlags) check() error {
	if f.url == "" {
		return usageError{errors.New("--nats URL is required")}
	}
	return nil
}

// options are the agent client's. Every agent-sim process runs for long
// (a world, a worker, a run waiting for its tree): its connection reconnects
// forever, so it rides out a coordinator restart with the embedded server
// (the bus away for longer than a command's 3 s); a worker's lease and
// heartbeat TTL, a run's --timeout, say when to give up.
func (f *connFlags) options(name string, log *slog.Logger) agent.Options {
	return agent.Options{Name: name, CredsFile: f.creds, NKeySeedFile: f.nkey, User: f.user, Password: f.password, Token: f.token,
		CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, Logger: log, MaxReconnects: -1}
}

// connect opens an agent client.
func (f *connFlags) connect(ctx context.Context, name string, log *slog.Logger) (*agent.Client, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := agent.Connect(cctx, f.url, f.options(name, log))
	if err != nil {
		return nil, fmt.Errorf("cannot reach the bus at %s: %w (is a coordinator serving it?)", f.url, err)
	}
	return c, nil
}
