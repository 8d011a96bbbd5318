package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/serve"
)

// addCredFlags registers the bus credential and TLS flags, the nats CLI's
// names, on every command that talks to the bus.
func addCredFlags(f *pflag.FlagSet, c *stream.Credentials) {
	f.StringVar(&c.CredsFile, "creds", "", "NATS credentials `FILE` (.creds: user JWT and nkey seed)")
	f.StringVar(&c.NKeyFile, "nkey", "", "`FILE` holding an nkey seed (coordinator credentials new writes one)")
	f.StringVar(&c.User, "user", "", "NATS user `NAME` (with --password)")
	f.StringVar(&c.Password, "password", "", "NATS `PASSWORD` (default $LOGBOOK_NATS_PASSWORD, which keeps it out of ps)")
	f.StringVar(&c.Token, "token", "", "NATS auth `TOKEN` (default $LOGBOOK_NATS_TOKEN)")
	f.StringVar(&c.TLSCA, "tls-ca", "", "PEM CA `FILE` the server's certificate must chain to")
	f.StringVar(&c.TLSCert, "tls-cert", "", "PEM client certificate `FILE` (with --tls-key)")
	f.StringVar(&c.TLSKey, "tls-key", "", "PEM key `FILE` of --tls-cert")
}

// withEnv fills the password and token from the environment when their
// flags are not given.
func withEnv(c stream.Credentials) stream.Credentials {
	if c.Password == "" && c.User != "" {
		c.Password = os.Getenv("LOGBOOK_NATS_PASSWORD")
	}
	if c.Token == "" && c.User == "" && c.CredsFile == "" && c.NKeyFile == "" {
		c.Token = os.Getenv("LOGBOOK_NATS_TOKEN")
	}
	return c
}

// dialOptions are the connection options of a command: its flags, else,
// for a bus found through a data dir, the serving coordinator's local
// operator key (DATA/nats.nk) when there is one.
func dialOptions(c stream.Credentials, dir string) ([]nats.Option, error) {
	c = withEnv(c)
	if !c.Given() && dir != "" {
		key := datadir.KeyPath(dir)
		if _, err := os.Stat(key); err == nil {
			c.NKeyFile = key
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	if !c.TLS() && dir != "" {
		b, err := os.ReadFile(datadir.TLSPath(dir))
		switch {
		case err == nil:
			var lt serve.LocalTLS
			if err := json.Unmarshal(b, &lt); err != nil || lt.Trust == "" {
				return nil, fmt.Errorf("%s: not the TLS files of a serving coordinator: %v", datadir.TLSPath(dir), err)
			}
			c.TLSCA, c.TLSCert, c.TLSKey = lt.Trust, lt.Cert, lt.Key
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	return c.Options()
}
