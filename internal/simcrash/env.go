package simcrash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

// Env is what scenarios share: one embedded nats-server with JetStream set
// up as `coordinator serve` sets it up, and the coordinator's mirror and
// index running in this process on a data dir, as serve runs them. Every
// scenario uses ids of its own, so they run side by side.
type Env struct {
	Dir string
	ns  *server.Server
	nc  *nats.Conn
	bus *stream.Bus // the checker's (and supervisor's) connection
	js  jetstream.JetStream
	// leases is LEASES: the harness expires a dead process's leases by
	// deleting them (the TTL passing, at once).
	leases jetstream.KeyValue
	addr   string // host:port of the server
	log    *slog.Logger

	// restarts are the mirror restarts under way after a crash of it;
	// restartErr is why one failed.
	restarts   sync.WaitGroup
	restartErr error

	mu     sync.Mutex
	m      *mirror.Mirror
	ix     *index.Index
	cancel context.CancelFunc
	done   chan error
}

// EnvOptions tune NewEnv.
type EnvOptions struct {
	Dir      string        // data dir (the server's store is Dir/nats); required
	LeaseTTL time.Duration // default 20 s: no live lease expires under load
	Logger   *slog.Logger  // nil: discard
	// FS is the mirror's file system (nil: the OS's). A scenario with a
	// mirror crash point gives a crashFS.
	FS mirror.FS
}

// NewEnv starts the bus, the mirror and the index.
func NewEnv(ctx context.Context, o EnvOptions) (*Env, error) {
	if o.Dir == "" {
		return nil, errors.New("simcrash: no data dir")
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 20 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ns, err := stream.StartServer(stream.ServerConfig{StoreDir: filepath.Join(o.Dir, datadir.NATSStore), Listen: "127.0.0.1:0", Fsync: stream.FsyncInterval})
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: o.Dir, ns: ns, log: o.Logger}
	u, err := url.Parse(ns.ClientURL())
	if err != nil {
		e.Close()
		return nil, err
	}
	e.addr = u.Host
	if e.nc, err = nats.Connect(ns.ClientURL(), nats.Name("simcrash-checker")); err != nil {
		e.Close()
		return nil, err
	}
	if e.js, err = jetstream.New(e.nc); err != nil {
		e.Close()
		return nil, err
	}
	if err := stream.Setup(ctx, e.js, stream.SetupConfig{LeaseTTL: o.LeaseTTL}); err != nil {
		e.Close()
		return nil, err
	}
	if e.bus, err = stream.Open(ctx, e.nc, stream.Options{Logger: o.Logger}); err != nil {
		e.Close()
		return nil, err
	}
	if e.leases, err = e.js.KeyValue(ctx, stream.BucketLeases); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.StartMirror(ctx, o.FS); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// URL is the server's client URL.
func (e *Env) URL() string { return e.ns.ClientURL() }

// Bus is the checker's bus.
func (e *Env) Bus() *stream.Bus { return e.bus }

// StartMirror opens the mirror and the index on the data dir and starts
// mirroring, as serve does (fs nil: the OS's files).
func (e *Env) StartMirror(ctx context.Context, fs mirror.FS) error {
	m, err := mirror.Open(ctx, mirror.Config{Dir: e.Dir, ColdAfter: -1, Logger: e.log, FS: fs})
	if err != nil {
		return err
	}
	ix, err := index.Open(ctx, e.Dir, index.Options{Logger: e.log})
	if err != nil {
		m.Close()
		return err
	}
	if _, err := ix.CatchUp(ctx, nil); err != nil {
		ix.Close()
		m.Close()
		return err
	}
	m.SetIndex(ix)
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx, e.bus) }()
	e.mu.Lock()
	e.m, e.ix, e.cancel, e.done = m, ix, cancel, done
	e.mu.Unlock()
	return nil
}

// restartMirror is the coordinator coming back after its mirror died: the
// dead mirror's Run is stopped (nothing it does reaches the disk), then a
// mirror and an index are opened on the data dir again, as serve does at
// start-up (repairs first), on the OS's file system.
func (e *Env) restartMirror(ctx context.Context) {
	defer e.restarts.Done()
	err := e.StopMirror()
	var pe *os.PathError
	if errors.As(err, &pe) && errors.Is(err, syscall.EIO) {
		err = nil // the dead mirror's own last words
	}
	if err == nil {
		err = e.StartMirror(ctx, nil)
	}
	if err != nil {
		e.mu.Lock()
		e.restartErr = err
		e.mu.Unlock()
	}
}

// settled waits for mirror restarts and says whether one failed.
func (e *Env) settled() error {
	e.restarts.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restartErr
}

// StopMirror stops the mirror and closes it and the index.
func (e *Env) StopMirror() error {
	e.mu.Lock()
	m, ix, cancel, done := e.m, e.ix, e.cancel, e.done
	e.m, e.ix = nil, nil
	e.mu.Unlock()
	if m == nil {
		return nil
	}
	cancel()
	err := <-done
	if cerr := ix.Close(); err == nil {
		err = cerr
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return err
}

// mirrorNow returns the running mirror and index (nil while stopped).
func (e *Env) mirrorNow() (*mirror.Mirror, *index.Index) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m, e.ix
}

// Close stops everything.
func (e *Env) Close() error {
	err := e.StopMirror()
	if e.nc != nil {
		e.nc.Close()
	}
	if e.ns != nil {
		e.ns.Shutdown()
		e.ns.WaitForShutdown()
	}
	return err
}

// mail is the supervisor's view of the mailboxes: how many messages wait
// on MAIL for each thread (one stream-info call over MAIL's subjects, as
// the supervisor makes it; MAIL holds only what is not yet received).
func (e *Env) mail(ctx context.Context) (map[string]int, error) {
	info, err := e.bus.StreamInfo(ctx, stream.StreamMail, jetstream.WithSubjectFilter(stream.MailSubject(">")))
	if err != nil {
		return nil, fmt.Errorf("simcrash: MAIL: %w", err)
	}
	out := make(map[string]int, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, stream.MailSubject(""))] = int(n)
	}
	return out, nil
}

// exists reports whether THREADS knows the thread.
func (e *Env) exists(ctx context.Context, thread string) (bool, error) {
	_, err := e.bus.Threads().Get(ctx, thread)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		return false, nil
	}
	return false, fmt.Errorf("simcrash: THREADS %s: %w", thread, err)
}

// expire makes a dead process's hold on a thread go away as time would:
// its lease (the TTL passing) and its mailbox consumer (the consumer's
// inactivity threshold passing, so what it had taken and not acknowledged
// is delivered again to the next mailbox).
func (e *Env) expire(ctx context.Context, thread, holder string) error {
	l, err := e.bus.ReadLease(ctx, thread)
	if err != nil {
		return err
	}
	if l != nil && l.Holder == holder {
		if err := e.leases.Delete(ctx, thread, jetstream.LastRevision(l.Revision)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("simcrash: expire the lease of %s: %w", thread, err)
		}
	}
	err = e.js.DeleteConsumer(ctx, stream.StreamMail, stream.MailConsumerName(thread))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("simcrash: expire the mailbox of %s: %w", thread, err)
	}
	return nil
}
