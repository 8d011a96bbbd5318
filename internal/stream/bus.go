package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bus is a connection to Logbook's streams and buckets. Setup must have run
// (the coordinator does it at start-up). A Bus does not own its connection.
type Bus struct {
	nc          *nats.Conn
	js          jetstream.JetStream
	threads     jetstream.KeyValue
	leases      jetstream.KeyValue
	workers     jetstream.KeyValue
	leaseTTL    time.Duration
	callTimeout time.Duration
	// unavailableAfter bounds one call's retries (DefaultUnavailableAfter).
	unavailableAfter time.Duration
	recordLimit      int
	log              *slog.Logger
	gets             atomic.Int64 // ROLLOUTS messages fetched (getMsg calls)
	// answering, when a test sets it, runs before a thread record is
	// answered (ServeThreadRecords), with the request's thread.
	answering func(thread string)
}

// Options tune a Bus.
type Options struct {
	// RecordLimit is the largest encoded record line (with its '\n') a writer
	// accepts; 0 means the server's max payload less a header reserve. It is
	// capped at that value.
	RecordLimit int
	// CallTimeout bounds one attempt of one bus call; 0 means
	// DefaultCallTimeout. Transient failures are retried within the
	// caller's context, which bounds the whole operation.
	CallTimeout time.Duration
	// UnavailableAfter bounds how long one call retries transient failures
	// before it fails with ErrBusUnavailable, whatever the caller's
	// deadline; 0 means four call timeouts (DefaultUnavailableAfter, 20 s,
	// with the default call timeout).
	UnavailableAfter time.Duration
	Logger           *slog.Logger // nil: slog.Default()
}

// Open binds to the streams and buckets on nc's server. Its calls are
// bounded and retried like every bus call.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Bus, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	b := &Bus{nc: nc, js: js, log: o.Logger, callTimeout: o.CallTimeout, unavailableAfter: o.UnavailableAfter}
	if b.callTimeout <= 0 {
		b.callTimeout = DefaultCallTimeout
	}
	if b.unavailableAfter <= 0 {
		b.unavailableAfter = unavailableCalls * b.callTimeout
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if err := b.retry(ctx, "stream info", func(ctx context.Context) error { _, err := js.Stream(ctx, StreamRollouts); return err }); err != nil {
		return nil, fmt.Errorf("stream: stream %s: %w (run coordinator serve to set up the bus)", StreamRollouts, err)
	}
	bucket := func(name string) (jetstream.KeyValue, error) {
		var kv jetstream.KeyValue
		err := b.retry(ctx, "bucket "+name, func(ctx context.Context) (err error) { kv, err = js.KeyValue(ctx, name); return err })
		if err != nil {
			return nil, fmt.Errorf("stream: bucket %s: %w", name, err)
		}
		return &boundedKV{KeyValue: kv, bus: b}, nil
	}
	if b.threads, err = bucket(BucketThreads); err != nil {
		return nil, err
	}
	if b.leases, err = bucket(BucketLeases); err != nil {
		return nil, err
	}
	if b.workers, err = bucket(BucketWorkers); err != nil {
		return nil, fmt.Errorf("%w (a coordinator of this version sets it up)", err)
	}
	st, err := b.leases.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream: bucket %s: %w", BucketLeases, err)
	}
	if b.leaseTTL = st.TTL(); b.leaseTTL <= 0 {
		return nil, fmt.Errorf("%w: bucket %s has no TTL: leases would never expire", ErrConfigMismatch, BucketLeases)
	}
	limit := MaxRecord(nc.MaxPayload())
	if o.RecordLimit > 0 && o.RecordLimit < limit {
		limit = o.RecordLimit
	}
	if limit < 1024 {
		return nil, fmt.Errorf("stream: server max payload %d leaves no room for records", nc.MaxPayload())
	}
	b.recordLimit = limit
	return b, nil
}

// MaxRecord is the default record limit for a server max payload.
func MaxRecord(maxPayload int64) int { return int(maxPayload) - headerReserve }

// JetStream returns the JetStream context the bus uses. Calls through it
// are not bounded: wrap each in Call (tests and tools; the project's own
// code uses the Bus's methods).
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Conn returns the connection the bus uses.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// RecordLimit is the largest encoded record line writers accept.
func (b *Bus) RecordLimit() int { return b.recordLimit }

// LeaseTTL is the TTL of the LEASES bucket.
func (b *Bus) LeaseTTL() time.Duration { return b.leaseTTL }

// Threads is the THREADS bucket (thread id -> current rollout id). Each of
// its calls (get, create, update, delete, keys, status ...) is bounded and
// retried like every bus call (Call); watches are not.
func (b *Bus) Threads() jetstream.KeyValue { return b.threads }

// storedMsg is a message read from ROLLOUTS.
type storedMsg struct {
	Subject string
	Seq     uint64
	Header  nats.Header
	Data    []byte
}

// errNoMsg: no message matches a get.
var errNoMsg = errors.New("stream: no message")

// getMsg reads a message of ROLLOUTS through the stream leader (the
// STREAM.MSG.GET API, not a direct get): a direct get may be answered by a
// follower that has not applied the latest writes, and fencing decisions
// must see them. Either lastFor, or seq with nextFor ("the first message of
// nextFor at or after seq"), or seq alone.
func (b *Bus) getMsg(ctx context.Context, seq uint64, lastFor, nextFor string) (*storedMsg, error) {
	b.gets.Add(1)
	return b.getStreamMsg(ctx, StreamRollouts, seq, lastFor, nextFor)
}

// RolloutGets counts the messages of ROLLOUTS this Bus has fetched, one
// STREAM.MSG.GET each (a read, a tail lookup, a binary-search probe):
// tests and benchmarks read it to show what a read of a rollout cost.
func (b *Bus) RolloutGets() int64 { return b.gets.Load() }

// Tail is the last message of a rollout on the bus.
type Tail struct {
	Seq     uint64 // stream sequence; 0 for an empty rollout
	Ordinal int64  // last ordinal; 0 for an empty rollout
	Epoch   uint64 // epoch of the writer of the last message
}

// Tail reads the last message of a rollout (from the stream leader).
func (b *Bus) Tail(ctx context.Context, rolloutID string) (Tail, error) {
	subj := RolloutSubject(rolloutID)
	m, err := b.getMsg(ctx, 0, subj, "")
	if errors.Is(err, errNoMsg) {
		return Tail{}, nil
	}
	if err != nil {
		return Tail{}, fmt.Errorf("stream: tail of rollout %s: %w", rolloutID, err)
	}
	p, err := DecodePack(m.Subject, m.Seq, m.Header, m.Data)
	if err != nil {
		return Tail{Seq: m.Seq}, fmt.Errorf("stream: tail of rollout %s: %w", rolloutID, err)
	}
	return Tail{Seq: m.Seq, Ordinal: p.Last, Epoch: p.Epoch}, nil
}

// StreamInfo reads a stream's info (with opts, such as a subject filter),
// bounded and retried like every bus call.
func (b *Bus) StreamInfo(ctx context.Context, name string, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	var info *jetstream.StreamInfo
	err := b.retry(ctx, "stream info "+name, func(ctx context.Context) error {
		s, err := b.js.Stream(ctx, name)
		if err != nil {
			return err
		}
		if len(opts) == 0 {
			info = s.CachedInfo()
			return nil
		}
		info, err = s.Info(ctx, opts...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream: stream %s: %w", name, err)
	}
	return info, nil
}

// PurgeRollout removes every message of a rollout from ROLLOUTS (gc), bounded
// and retried like every bus call (a purge repeated purges nothing more).
func (b *Bus) PurgeRollout(ctx context.Context, rolloutID string) error {
	err := b.retry(ctx, "purge", func(ctx context.Context) error {
		s, err := b.js.Stream(ctx, StreamRollouts)
		if err != nil {
			return err
		}
		return s.Purge(ctx, jetstream.WithPurgeSubject(RolloutSubject(rolloutID)))
	})
	if err != nil {
		return fmt.Errorf("stream: purge rollout %s: %w", rolloutID, err)
	}
	return nil
}
