package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
	"github.com/logbook-agents/logbook/internal/supervise"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// Config is what `coordinator serve` runs with.
type Config struct {
	DataDir    string        // required
	NATSURL    string        // use this server or cluster; "" embeds one
	NATSListen string        // embedded client address; default 127.0.0.1:4222, port 0 = random
	Replicas   int           // stream and bucket replicas; >1 needs NATSURL
	Listen     string        // HTTP address; default 127.0.0.1:7420, port 0 = random
	Fsync      string        // stream.FsyncAlways (default) or stream.FsyncInterval; embedded only
	LeaseTTL   time.Duration // 0: stream.DefaultLeaseTTL
	Security   Security      // credentials and TLS (auth.go)
	Logger     *slog.Logger  // nil: slog.Default()
	Stdout     io.Writer     // start-up lines (the URLs); nil: discarded
	// Ready, when set, is called once everything is up.
	Ready func(Info)
	// ColdAfter: idle time before the mirror compresses a rollout; 0 means
	// mirror.DefaultColdAfter, negative never.
	ColdAfter time.Duration
	// MirrorCommit, when set, is called after each durable mirror batch.
	MirrorCommit func(mirror.Commit)
}

// Info is what a running coordinator tells the world.
type Info struct {
	NATSURL     string // for agents and the nats CLI; also in <data>/nats.url
	HTTPAddr    string // host:port of the HTTP listener
	RecordLimit int    // largest record line writers accept
}

// Run runs the coordinator until ctx ends, then stops cleanly: HTTP server
// shut down, connection drained, embedded server shut down and waited for,
// lock released.
func Run(ctx context.Context, cfg Config) (err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	out := cfg.Stdout
	if out == nil {
		out = io.Discard
	}
	if cfg.DataDir == "" {
		return errors.New("serve: no data dir")
	}
	if cfg.Replicas > 1 && cfg.NATSURL == "" {
		return fmt.Errorf("serve: --replicas %d needs a cluster: give its URL with --nats (the embedded server is a single node)", cfg.Replicas)
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:7420"
	}
	if err := checkExposure(cfg); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("serve: data dir: %w", err)
	}
	lock, err := TakeLock(cfg.DataDir)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := lock.Release(); rerr != nil && err == nil {
			err = fmt.Errorf("serve: release lock: %w", rerr)
		}
	}()
	// Every listen address is taken before anything starts: a coordinator
	// that cannot serve HTTP must not have started NATS or written nats.url.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve: HTTP listen on %s (--listen): %w", cfg.Listen, err)
	}
	defer ln.Close()

	var ns *server.Server
	var nc *nats.Conn
	var emb *embedded
	url := cfg.NATSURL
	if url == "" {
		if emb, err = loadEmbedded(cfg.Security); err != nil {
			return err
		}
		ns, err = stream.StartServer(stream.ServerConfig{
			StoreDir: filepath.Join(cfg.DataDir, datadir.NATSStore), Listen: cfg.NATSListen, Fsync: cfg.Fsync, Logger: log,
			Users: emb.users, NKeys: emb.nkeys, TLS: emb.tls,
		})
		if err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
			log.Info("embedded nats-server stopped")
		}()
		url = ns.ClientURL()
		nc, err = nats.Connect("", append(emb.connectOptions(log), nats.InProcessServer(ns), nats.Name("logbook-coordinator"))...)
	} else {
		nc, err = connectExternal(url, cfg.Security.Client)
	}
	if err != nil {
		return fmt.Errorf("serve: connect to %s (--nats): %w", url, err)
	}
	defer drain(nc, log)

	if err := setup(ctx, nc, cfg, log); err != nil {
		return err
	}
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: log})
	if err != nil {
		return err
	}
	// A revert that died between its seal and its THREADS switch is finished
	// before anyone reads the thread; a thread that cannot be moved is logged
	// and left as it is (the revert's seal keeps appenders out).
	if moved, err := ops.RollForward(ctx, bus); err != nil {
		log.Error("rolling forward half-done reverts failed", "moved", moved, "err", err)
	} else if len(moved) > 0 {
		log.Info("rolled forward half-done reverts", "threads", moved)
	}
	// Agents' new threads are recorded in THREADS through here.
	recSub, err := bus.ServeThreadRecords(log)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer recSub.Unsubscribe()
	mr, err := startMirror(ctx, cfg, bus, log)
	if err != nil {
		return err
	}
	defer mr.stop()
	if err := writeLocalKey(cfg.DataDir, emb); err != nil {
		return err
	}
	defer removeLocalKey(cfg.DataDir, emb)
	if err := writeLocalTLS(cfg.DataDir, cfg); err != nil {
		return err
	}
	defer os.Remove(datadir.TLSPath(cfg.DataDir))
	urlFile := datadir.URLPath(cfg.DataDir)
	if err := writeFileAtomic(urlFile, []byte(url+"\n")); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// A clean stop takes its URL with it; a killed coordinator leaves it
	// behind, and the next serve overwrites it.
	defer os.Remove(urlFile)
	httpFile := datadir.HTTPURLPath(cfg.DataDir)
	if err := writeFileAtomic(httpFile, []byte("http://"+ln.Addr().String()+"\n")); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer os.Remove(httpFile)
	// Worker supervision: runnable threads are offered to live workers.
	sup := supervise.New(bus, supervise.Options{Logger: log})
	supCtx, stopSup := context.WithCancel(ctx)
	supDone := make(chan struct{})
	go func() { sup.Run(supCtx); close(supDone) }()
	defer func() { stopSup(); <-supDone }()
	mux := health(nc, url, mr.degraded)
	mux.HandleFunc("GET /status", mr.status)
	handler, err := withToken(mux, cfg.Security.HTTPTokenFile)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	httpErr := make(chan error, 1)
	go func() { httpErr <- hs.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()

	info := Info{NATSURL: url, HTTPAddr: ln.Addr().String(), RecordLimit: bus.RecordLimit()}
	fmt.Fprintf(out, "nats: %s\nhttp: http://%s\n", info.NATSURL, info.HTTPAddr)
	log.Info("coordinator serving", "data", cfg.DataDir, "nats", url, "embedded", ns != nil,
		"fsync", fsyncName(cfg), "replicas", max(cfg.Replicas, 1), "http", info.HTTPAddr, "record_limit", info.RecordLimit)
	if cfg.Ready != nil {
		cfg.Ready(info)
	}
	select {
	case <-ctx.Done():
		log.Info("stopping", "cause", context.Cause(ctx))
		return nil
	case err := <-httpErr:
		return fmt.Errorf("serve: HTTP server: %w", err)
	case err := <-mr.done:
		mr.done <- err
		return fmt.Errorf("serve: %w", err)
	}
}

func fsyncName(cfg Config) string {
	switch {
	case cfg.NATSURL != "":
		return "server's setting"
	case cfg.Fsync == "":
		return stream.FsyncAlways
	}
	return cfg.Fsync
}

// setup creates the streams and buckets, retrying while a cluster elects its
// JetStream leader; a configuration mismatch fails at once.
func setup(ctx context.Context, nc *nats.Conn, cfg Config, log *slog.Logger) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := stream.Setup(sctx, js, stream.SetupConfig{Replicas: cfg.Replicas, LeaseTTL: cfg.LeaseTTL})
		cancel()
		if err == nil || errors.Is(err, stream.ErrConfigMismatch) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		log.Warn("bus setup failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func drain(nc *nats.Conn, log *slog.Logger) {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		log.Warn("connection drain timed out")
		nc.Close()
	}
}

// health serves /healthz: 503 while the bus connection is down; else 200,
// with status "ok", or "degraded" and the reason when degraded (the mirror
// failing, the disk full, the index unavailable) returns one.
func health(nc *nats.Conn, url string, degraded func() string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		body := map[string]string{"status": "ok", "nats": url}
		code := http.StatusOK
		if !nc.IsConnected() {
			body["status"], code = "nats "+nc.Status().String(), http.StatusServiceUnavailable
		} else if why := degraded(); why != "" {
			body["status"], body["reason"] = "degraded", why
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
	return mux
}

// writeFileAtomic writes path by temp file, fsync, rename and directory
// fsync: readers see the old content or the new, never a mix. The file is
// 0600, as every file of the data dir (docs/CLI.md).
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// connectExternal connects the coordinator to the server or cluster --nats
// names. The first connection must succeed within seconds (a wrong URL is
// reported as "connection refused", not as a setup timeout a minute later);
// once connected, a lost connection is retried for as long as it serves.
func connectExternal(urls string, creds stream.Credentials) (*nats.Conn, error) {
	opts, err := creds.Options()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(urls, append([]nats.Option{nats.Name("logbook-coordinator"),
		nats.Timeout(stream.ConnectTimeout), nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		// nats.go reports every refused dial as "no servers available";
		// dial one URL ourselves to say why.
		for _, u := range strings.Split(urls, ",") {
			if why := dialError(strings.TrimSpace(u)); why != nil {
				return nil, fmt.Errorf("%w (%v)", err, why)
			}
		}
		return nil, err
	}
	return nc, nil
}

// dialError is the TCP error of one attempt to reach url's host:port, or nil.
func dialError(url string) error {
	hostport := url
	if i := strings.Index(hostport, "://"); i >= 0 {
		hostport = hostport[i+3:]
	}
	if i := strings.LastIndex(hostport, "@"); i >= 0 {
		hostport = hostport[i+1:]
	}
	if !strings.Contains(hostport, ":") {
		hostport += ":4222"
	}
	c, err := net.DialTimeout("tcp", hostport, stream.ConnectTimeout)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}
