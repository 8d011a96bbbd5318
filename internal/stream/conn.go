package stream

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// Connection bounds. A client that loses its server tries the other URLs
// (a cluster's new leader is reached through any node) for about
// ReconnectTries x (ReconnectWait + ConnectTimeout), then closes the
// connection, so every call still waiting fails with nats.ErrConnectionClosed
// instead of hanging until its own deadline.
const (
	ConnectTimeout = 2 * time.Second        // one dial
	ReconnectWait  = 250 * time.Millisecond // between reconnect rounds
	ReconnectTries = 10                     // rounds before the connection is closed
)

// Dial connects a client (a CLI command or a writer) to urls (comma-separated,
// any node of a cluster) with the bounds above. A lost connection is logged
// when it happens; once the tries are spent, the connection is closed and
// waiting calls return at once. Extra options (credentials, TLS, other
// reconnect bounds) come after these and override them.
func Dial(urls, name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if log == nil {
		log = slog.Default()
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(ConnectTimeout),
		nats.MaxReconnects(ReconnectTries),
		nats.ReconnectWait(ReconnectWait),
		nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if err != nil {
				log.Warn("lost the bus; reconnecting", "url", c.ConnectedUrlRedacted(), "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("reconnected to the bus", "url", c.ConnectedUrlRedacted())
		}),
		// The server answers a denied publish or subscribe with nothing but
		// this asynchronous error (a denied request just times out): say so.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("bus error", "err", err)
		}),
		nats.ClosedHandler(func(c *nats.Conn) {
			if err := c.LastError(); err != nil {
				log.Warn("bus connection closed", "err", err)
			}
		}),
	}
	nc, err := nats.Connect(urls, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("stream: connect to %s: %w", urls, err)
	}
	return nc, nil
}
