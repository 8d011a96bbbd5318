package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/stream"
)

// Options are how a Client connects. The zero value connects without
// credentials, which a coordinator serving on loopback accepts.
type Options struct {
	// Name identifies this process in lease values and on the server
	// (default agent@<host>:<pid>).
	Name string

	// Credentials: at most one of CredsFile, NKeySeedFile, Token and
	// User/Password.
	CredsFile    string // a .creds file (JWT and nkey seed), as the nats CLI takes
	NKeySeedFile string // a file holding an nkey seed (SU...)
	User         string
	Password     string
	Token        string

	// TLS: CAFile to verify the server; CertFile and KeyFile for a client
	// certificate. Any of them turns TLS on.
	CAFile, CertFile, KeyFile string

	// Reconnection after a lost connection: every URL is tried
	// MaxReconnects times, ReconnectWait apart, then the connection is
	// closed and every call waiting on it fails. Zero values take the
	// coordinator's own bounds (10 tries, 250 ms: about 3 s). A negative
	// MaxReconnects tries forever: what a long-running process wants (a
	// worker, a service), whose leases and heartbeat, not its connection,
	// say when it must give up; meanwhile each call still fails at its own
	// timeout.
	MaxReconnects int
	ReconnectWait time.Duration

	// CallTimeout bounds one attempt of one bus call (default 5 s); the
	// caller's context bounds the whole operation, retries included.
	CallTimeout time.Duration

	Logger *slog.Logger // nil: slog.Default()
}

// Client is a connection to a Logbook bus. It is safe for concurrent use;
// each Thread it opens is used by one goroutine at a time.
type Client struct {
	nc   *nats.Conn
	bus  *stream.Bus
	name string
	log  *slog.Logger
}

// Connect connects to the bus at urls (comma-separated: any nodes of a
// cluster). The bus must have been set up by a coordinator (`coordinator
// serve`); Connect only looks its streams and buckets up.
func Connect(ctx context.Context, urls string, o Options) (*Client, error) {
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = fmt.Sprintf("agent@%s:%d", host, os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	extra, err := o.natsOptions()
	if err != nil {
		return nil, err
	}
	nc, err := stream.Dial(urls, o.Name, o.Logger, extra...)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: o.Logger, CallTimeout: o.CallTimeout})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	return &Client{nc: nc, bus: bus, name: o.Name, log: o.Logger}, nil
}

// natsOptions turns the credentials, TLS and reconnect settings into
// connection options, by the coordinator's own rule (stream.Credentials:
// one kind of credential, files read now so a bad one is named at once).
func (o Options) natsOptions() ([]nats.Option, error) {
	c := stream.Credentials{CredsFile: o.CredsFile, NKeyFile: o.NKeySeedFile, User: o.User, Password: o.Password,
		Token: o.Token, TLSCA: o.CAFile, TLSCert: o.CertFile, TLSKey: o.KeyFile}
	out, err := c.Options()
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if o.MaxReconnects != 0 {
		out = append(out, nats.MaxReconnects(o.MaxReconnects))
	}
	if o.ReconnectWait > 0 {
		out = append(out, nats.ReconnectWait(o.ReconnectWait))
	}
	return out, nil
}

// Conn is the client's NATS connection, for an agent's own traffic beside
// Logbook's (request/reply to its tools, say): same credentials, TLS and
// reconnect settings. Closing it closes the Client.
func (c *Client) Conn() *nats.Conn { return c.nc }

// Close closes the connection. Threads still open lose their leases when
// they expire; Close them first to release them at once.
func (c *Client) Close() { c.nc.Close() }

// LeaseTTL is how long a lease lives without renewal on this bus: a
// thread whose process dies can be opened elsewhere after at most this.
func (c *Client) LeaseTTL() time.Duration { return c.bus.LeaseTTL() }
