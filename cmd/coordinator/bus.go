package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
)

// busFlags say how a writing command reaches the bus: --nats URL, else the
// URL a serving coordinator wrote to DATA/nats.url.
type busFlags struct {
	data    string
	natsURL string
	creds   stream.Credentials
	timeout time.Duration
}

func (f *busFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.data, "data", "", "the data dir of the serving coordinator (`DIR`; its nats.url names the bus); default $LOGBOOK_DATA, else ~/.logbook")
	cmd.Flags().StringVar(&f.natsURL, "nats", "", "connect to this NATS `URL` instead of the data dir's nats.url")
	addCredFlags(cmd.Flags(), &f.creds)
	cmd.Flags().DurationVar(&f.timeout, "timeout", 2*time.Minute, "bound the whole command (every bus call and retry within it) by this `DURATION`")
}

// check rejects flag values no command could use (a usage error).
func (f *busFlags) check() error {
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be more than 0", f.timeout)
	}
	return nil
}

// dataDir is --data or the default.
func (f *busFlags) dataDir() (string, error) {
	if f.data != "" {
		return f.data, nil
	}
	return defaultDataDir()
}

// connect opens the bus; the returned function closes it.
func (f *busFlags) connect(ctx context.Context) (*stream.Bus, func(), error) {
	url := f.natsURL
	var viaDir string
	if url == "" {
		dir, err := f.dataDir()
		if err != nil {
			return nil, nil, err
		}
		b, err := os.ReadFile(datadir.URLPath(dir))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s has no %s: is a coordinator serving it? (start one: coordinator serve --data %s; or give --nats URL)", dir, datadir.NATSURL, dir)
		}
		if err != nil {
			return nil, nil, err
		}
		url = strings.TrimSpace(string(b))
		viaDir = dir
	}
	opts, err := dialOptions(f.creds, viaDir)
	if err != nil {
		return nil, nil, err
	}
	nc, err := stream.Dial(url, "coordinator cli", nil, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach the bus at %s: %w (is the coordinator running?)", url, err)
	}
	bus, err := stream.Open(ctx, nc, stream.Options{})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return bus, func() { nc.Drain() }, nil
}

// open gives a command a context bounded by timeout and the bus; done
// closes both.
func (f *busFlags) open(cmd *cobra.Command, timeout time.Duration) (context.Context, *stream.Bus, func(), error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	bus, closeBus, err := f.connect(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, bus, func() { closeBus(); cancel() }, nil
}

// holder names this process in leases: user@host/pid.
func holder(role string) string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%s@%s/%d", role, name, host, os.Getpid())
}
