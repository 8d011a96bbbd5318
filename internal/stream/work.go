package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Names of worker supervision on the bus. Part of the wire format.
const (
	StreamWork    = "WORK"    // work queue of work.<thread_id>: offers of runnable threads
	BucketWorkers = "WORKERS" // KV: worker id -> its heartbeat (WorkerInfo); TTL = the lease TTL
	WorkConsumer  = "workers" // the one durable consumer every worker pulls offers from

	workPrefix = "work."

	errMaxMsgsPerSubject = 10077 // the server's "maximum messages per subject exceeded"
)

// WorkSubject is the subject of a thread's offer.
func WorkSubject(thread string) string { return workPrefix + thread }

// WorkConfig is WORK: a work queue holding at most one offer per thread
// (a second offer while one waits is refused by the server, so a thread is
// never offered twice at once), removed when a worker acknowledges it.
func WorkConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                 StreamWork,
		Description:          "Logbook: runnable threads offered to workers, work.<thread_id>, one offer per thread",
		Subjects:             []string{workPrefix + ">"},
		Retention:            jetstream.WorkQueuePolicy,
		MaxMsgs:              -1,
		MaxBytes:             -1,
		MaxMsgsPerSubject:    1,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		Storage:              jetstream.FileStorage,
		Replicas:             replicas,
		Duplicates:           DedupeWindow,
	}
}

func workersConfig(replicas int, ttl time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      BucketWorkers,
		Description: "Logbook: worker id -> heartbeat; a worker whose key expired is dead",
		History:     1,
		TTL:         ttl,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
}

// Offer reasons.
const (
	OfferMail       = "mail"        // mail waits in the thread's mailbox and nobody holds it
	OfferWorkerDied = "worker_died" // the worker that held it stopped heartbeating
	OfferRetry      = "retry"       // a worker's handler failed on it: run it again
)

// OfferInfo is the payload of an offer.
type OfferInfo struct {
	Thread  string `json:"thread"`
	Reason  string `json:"reason"`
	Offered string `json:"offered"`
}

// Offer publishes an offer of a runnable thread to the workers. It reports
// false, with no error, when an offer of the thread already waits.
func (b *Bus) Offer(ctx context.Context, thread, reason string) (bool, error) {
	if err := rollout.ValidateID("thread id", thread); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	body, _ := json.Marshal(OfferInfo{Thread: thread, Reason: reason, Offered: stamp(time.Now())})
	waiting := false
	err := b.retry(ctx, "offer "+thread, func(ctx context.Context) error {
		_, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: WorkSubject(thread), Data: body})
		var api *jetstream.APIError
		if errors.As(err, &api) && api.ErrorCode == errMaxMsgsPerSubject { // a 503, yet final
			waiting = true
			return nil
		}
		return err
	})
	if waiting {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stream: offer %s: %w", thread, err)
	}
	return true, nil
}

// Offers is the workers' shared consumer on WORK: each offer goes to one
// worker; one not acknowledged within its ack wait (the lease TTL) goes to
// another. A short wait is safe: an offer is only a hint, and a worker
// given one whose thread another is still opening finds the lease held and
// drops it; a long one delayed the thread of a worker that died holding an
// unacknowledged offer by that long (30 s), far past the lease TTL.
type Offers struct{ cons jetstream.Consumer }

// workConsumerConfig is the workers' one durable consumer on WORK. Setup
// creates it, so that workers only bind to it (agents may not create or
// change consumers on WORK).
// An offer taken by a worker that dies before acknowledging it goes to
// another worker after one lease TTL, as the thread's lease would.
func workConsumerConfig(leaseTTL time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       WorkConsumer,
		FilterSubject: workPrefix + ">",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       max(leaseTTL, time.Second),
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// OpenOffers binds to the workers' consumer (creating it if the bus was
// set up before it existed and these credentials may).
func (b *Bus) OpenOffers(ctx context.Context) (*Offers, error) {
	var cons jetstream.Consumer
	err := b.retry(ctx, "work consumer", func(ctx context.Context) (err error) {
		cons, err = b.js.Consumer(ctx, StreamWork, WorkConsumer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = b.js.CreateOrUpdateConsumer(ctx, StreamWork, workConsumerConfig(b.leaseTTL))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream: work consumer: %w", err)
	}
	return &Offers{cons: cons}, nil
}

// Offered is one offer taken by a worker: Ack it once the thread is opened
// (or found held by someone else), Nak it to hand it to another worker.
type Offered struct {
	OfferInfo
	msg jetstream.Msg
}

// Ack removes the offer.
func (o *Offered) Ack(ctx context.Context) error { return o.msg.DoubleAck(ctx) }

// Nak gives the offer back, to be delivered again after delay.
func (o *Offered) Nak(delay time.Duration) error { return o.msg.NakWithDelay(delay) }

// Take waits at most wait for up to n offers. Malformed offers are
// acknowledged (dropped) and not returned.
func (o *Offers) Take(ctx context.Context, n int, wait time.Duration) ([]*Offered, error) {
	batch, err := o.cons.Fetch(n, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, fmt.Errorf("stream: take offers: %w", err)
	}
	var out []*Offered
	for m := range batch.Messages() {
		var info OfferInfo
		if json.Unmarshal(m.Data(), &info) != nil || rollout.ValidateID("thread id", info.Thread) != nil {
			m.Term()
			continue
		}
		out = append(out, &Offered{OfferInfo: info, msg: m})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return out, fmt.Errorf("stream: take offers: %w", err)
	}
	return out, nil
}

// WorkerInfo is a worker's heartbeat in WORKERS.
type WorkerInfo struct {
	ID       string   `json:"id"`
	Host     string   `json:"host"`
	PID      int      `json:"pid"`
	Capacity int      `json:"capacity"`
	Threads  []string `json:"threads"`
	Started  string   `json:"started"`
	Beat     string   `json:"heartbeat"`
	// Stopped is set by a worker's last heartbeat on a clean shutdown.
	Stopped bool `json:"stopped,omitempty"`
	// Orphaned are the threads an earlier process under this id held
	// when it died (its last heartbeat was not Stopped): a process
	// restarted under the same id overwrites that heartbeat at once, so it
	// carries them for the supervisor to offer.
	Orphaned []string `json:"orphaned,omitempty"`
}

// Heartbeat writes a worker's heartbeat (its key lives one TTL).
func (b *Bus) Heartbeat(ctx context.Context, w WorkerInfo) error {
	if err := rollout.ValidateID("worker id", w.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if w.Threads == nil {
		w.Threads = []string{}
	}
	w.Beat = stamp(time.Now())
	body, _ := json.Marshal(w)
	err := b.retry(ctx, "heartbeat "+w.ID, func(ctx context.Context) error {
		_, err := b.workers.Put(ctx, w.ID, body)
		return err
	})
	if err != nil {
		return fmt.Errorf("stream: heartbeat of worker %s: %w", w.ID, err)
	}
	return nil
}

// Workers lists the workers whose heartbeat has not expired, by id.
func (b *Bus) Workers(ctx context.Context) ([]WorkerInfo, error) {
	var keys []string
	err := b.retry(ctx, "list workers", func(ctx context.Context) (err error) {
		keys, err = b.workers.Keys(ctx)
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			keys, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream: list workers: %w", err)
	}
	out := make([]WorkerInfo, 0, len(keys))
	for _, k := range keys {
		w, ok, err := b.Worker(ctx, k)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Worker reads one worker's heartbeat (false: none, it expired, or the key
// holds no heartbeat of that id).
func (b *Bus) Worker(ctx context.Context, id string) (WorkerInfo, bool, error) {
	var e jetstream.KeyValueEntry
	err := b.retry(ctx, "get worker", func(ctx context.Context) (err error) { e, err = b.workers.Get(ctx, id); return err })
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return WorkerInfo{}, false, nil
	}
	if err != nil {
		return WorkerInfo{}, false, fmt.Errorf("stream: worker %s: %w", id, err)
	}
	var w WorkerInfo
	if json.Unmarshal(e.Value(), &w) != nil || w.ID != id {
		return WorkerInfo{}, false, nil // not a heartbeat: ignored, it expires
	}
	return w, true, nil
}

// WorkerTTL is how long a heartbeat lives: the lease TTL.
func (b *Bus) WorkerTTL() time.Duration { return b.leaseTTL }

// MailWaiting reports whether any message waits in a thread's mailbox.
func (b *Bus) MailWaiting(ctx context.Context, thread string) (bool, error) {
	_, err := b.getStreamMsg(ctx, StreamMail, 1, "", MailSubject(thread))
	if errors.Is(err, errNoMsg) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stream: mailbox of %s: %w", thread, err)
	}
	return true, nil
}

// MailWaitingThreads lists the threads with mail waiting in their
// mailboxes: one stream-info call (paged by the server) over MAIL's
// subjects, not one call per thread.
func (b *Bus) MailWaitingThreads(ctx context.Context) ([]string, error) {
	var subjects map[string]uint64
	err := b.retry(ctx, "mail subjects", func(ctx context.Context) error {
		s, err := b.js.Stream(ctx, StreamMail)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(mailPrefix+">"))
		if err != nil {
			return err
		}
		subjects = info.State.Subjects
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stream: mail subjects: %w", err)
	}
	out := make([]string, 0, len(subjects))
	for subj, n := range subjects {
		if th := subj[len(mailPrefix):]; n > 0 && rollout.ValidateID("thread id", th) == nil {
			out = append(out, th)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ThreadKnown reports whether THREADS names a thread (a child that never
// wrote a line has no entry, and no agent can open it).
func (b *Bus) ThreadKnown(ctx context.Context, thread string) (bool, error) {
	err := b.retry(ctx, "threads get", func(ctx context.Context) error {
		_, err := b.threads.Get(ctx, thread)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stream: THREADS entry of %s: %w", thread, err)
	}
	return true, nil
}
