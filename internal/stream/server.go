package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedMaxPayload is the max payload of the embedded server: the largest
// record line is this less a header reserve (MaxRecord).
const EmbeddedMaxPayload = 8 << 20

// Fsync modes of the embedded server (see the package doc, Durability).
const (
	FsyncAlways   = "always"   // fsync every message before its ack
	FsyncInterval = "interval" // fsync every SyncInterval (NATS default 2 min)
)

// ServerConfig configures an embedded nats-server with JetStream.
type ServerConfig struct {
	Name     string // server name; default "logbook"
	StoreDir string // JetStream store; required (empty would mean the OS temp dir)
	Listen   string // client host:port; port 0 means a random port; default 127.0.0.1:4222
	Fsync    string // FsyncAlways (default) or FsyncInterval
	Logger   *slog.Logger

	// Users and NKeys, when any is set, are the only clients the server
	// accepts (each with its permissions); none means no authentication.
	Users []*server.User
	NKeys []*server.NkeyUser
	// TLS, when set, makes clients connect with TLS (in-process
	// connections excepted); with its CaFile and Verify, mutual TLS.
	TLS *server.TLSConfigOpts
	// Cluster, when set, makes the server a node of a JetStream cluster.
	Cluster *ClusterConfig
}

// ClusterConfig makes an embedded server a cluster node.
type ClusterConfig struct {
	Name   string   // the cluster's name, the same on every node
	Listen string   // the route listener's host:port; port 0 means a random port
	Routes []string // nats://host:port of the other nodes' route listeners (at least one)
}

// StartServer starts an embedded nats-server with JetStream, its own signal
// handling off, and waits until it accepts connections.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("stream: embedded server needs a store directory")
	}
	if cfg.Name == "" {
		cfg.Name = "logbook"
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:4222"
	}
	host, port, err := ParseListen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		JetStream:  true,
		StoreDir:   filepath.Clean(cfg.StoreDir),
		Host:       host,
		Port:       port,
		NoSigs:     true, // the server's own handler would os.Exit and skip our shutdown
		MaxPayload: EmbeddedMaxPayload,
	}
	opts.Users, opts.Nkeys = cfg.Users, cfg.NKeys
	if cfg.TLS != nil {
		tc, err := server.GenTLSConfig(cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("stream: embedded nats-server TLS (--tls-cert, --tls-key, --tls-ca): %w", err)
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify = tc, true, cfg.TLS.Verify
		opts.TLSTimeout = cfg.TLS.Timeout
	}
	if c := cfg.Cluster; c != nil {
		if err := clusterOpts(opts, c); err != nil {
			return nil, err
		}
	}
	switch cfg.Fsync {
	case "", FsyncAlways:
		opts.SyncAlways = true
	case FsyncInterval:
	default:
		return nil, fmt.Errorf("stream: --fsync %q: want %s or %s", cfg.Fsync, FsyncAlways, FsyncInterval)
	}
	if err := free(host, port, cfg.Listen, "--nats-listen"); err != nil {
		return nil, err
	}
	if cfg.Cluster != nil {
		if err := free(opts.Cluster.Host, opts.Cluster.Port, cfg.Cluster.Listen, "the cluster listener"); err != nil {
			return nil, err
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("stream: embedded nats-server: %w", err)
	}
	if cfg.Logger != nil {
		ns.SetLoggerV2(&natsLogger{cfg.Logger.With("component", "nats-server")}, false, false, false)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("stream: embedded nats-server on %s did not become ready (port in use?)", cfg.Listen)
	}
	if cfg.Cluster != nil {
		for deadline := time.Now().Add(10 * time.Second); ns.ClusterAddr() == nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				ns.Shutdown()
				ns.WaitForShutdown()
				return nil, fmt.Errorf("stream: embedded nats-server: no cluster listener on %s", cfg.Cluster.Listen)
			}
		}
	}
	return ns, nil
}

// free reports a busy fixed port before the server is started: the server
// says so only by never becoming ready.
func free(host string, port int, addr, what string) error {
	if port == server.RANDOM_PORT {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("stream: embedded nats-server cannot listen on %s (%s): %w", addr, what, err)
	}
	return l.Close()
}

// clusterOpts sets a cluster node's options from c.
func clusterOpts(opts *server.Options, c *ClusterConfig) error {
	if c.Name == "" || len(c.Routes) == 0 {
		return errors.New("stream: a cluster node needs the cluster's name and at least one route")
	}
	host, port, err := ParseListen(c.Listen)
	if err != nil {
		return fmt.Errorf("stream: cluster listener: %w", err)
	}
	var routes []*url.URL
	for _, r := range c.Routes {
		u, err := url.Parse(strings.TrimSpace(r))
		if err != nil || u.Scheme != "nats" || u.Port() == "" {
			return fmt.Errorf("stream: cluster route %q: want nats://host:port", r)
		}
		routes = append(routes, u)
	}
	opts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: port}
	opts.Routes = routes
	return nil
}

// ParseListen splits host:port; port 0 becomes -1, nats-server's "random"
// (its 0 means the default 4222).
func ParseListen(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("stream: listen address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("stream: listen address %q: bad port", addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host, port, nil
}

// natsLogger sends nats-server's log to slog.
type natsLogger struct{ l *slog.Logger }

// Notices (the start-up banner among them) are debug: the coordinator logs
// its own start-up line.
func (n *natsLogger) Noticef(f string, v ...any) { n.l.Debug(fmt.Sprintf(f, v...)) }
func (n *natsLogger) Warnf(f string, v ...any)   { n.l.Warn(fmt.Sprintf(f, v...)) }
func (n *natsLogger) Fatalf(f string, v ...any)  { n.l.Error(fmt.Sprintf(f, v...)) }
func (n *natsLogger) Errorf(f string, v ...any)  { n.l.Error(fmt.Sprintf(f, v...)) }
func (n *natsLogger) Debugf(f string, v ...any)  { n.l.Debug(fmt.Sprintf(f, v...)) }
func (n *natsLogger) Tracef(f string, v ...any)  { n.l.Debug(fmt.Sprintf(f, v...)) }
