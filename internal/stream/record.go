package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// SubjectRecordThread is the request subject on which coordinators record a
// new thread in THREADS for writers whose credentials may not write THREADS
// (agents). Part of the wire format: do not change.
const SubjectRecordThread = "logbook.api.threads.record"

// recordQueue is the queue group of the coordinators answering it: one
// answers each request.
const recordQueue = "logbook-coordinators"

// recordRequest and recordReply are the JSON bodies of SubjectRecordThread.
// Part of the wire format.
type recordRequest struct {
	Thread  string `json:"thread"`
	Rollout string `json:"rollout"`
}

type recordReply struct {
	Rollout string `json:"rollout,omitempty"` // the rollout THREADS now holds
	Error   string `json:"error,omitempty"`
}

// ErrRecordRefused: a coordinator refused to record a thread (its rollout's
// first record on the bus does not name it).
var ErrRecordRefused = errors.New("stream: thread record refused")

// RecordThread records rolloutID as thread's rollout in THREADS unless the
// thread has one already, and returns the rollout THREADS now holds. A
// coordinator listening on SubjectRecordThread does it (so that agents need
// no write access to THREADS); with none listening the bus writes THREADS
// itself. Each call is bounded and retried like every bus call.
func (b *Bus) RecordThread(ctx context.Context, thread, rolloutID string) (string, error) {
	for _, id := range [][2]string{{"thread id", thread}, {"rollout id", rolloutID}} {
		if err := rollout.ValidateID(id[0], id[1]); err != nil {
			return "", fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
	}
	body, _ := json.Marshal(recordRequest{Thread: thread, Rollout: rolloutID})
	var resp *nats.Msg
	err := b.retry(ctx, "record thread", func(ctx context.Context) (err error) {
		resp, err = b.nc.RequestWithContext(ctx, SubjectRecordThread, body)
		if errors.Is(err, nats.ErrNoResponders) {
			return errNoCoordinator // not transient here: write directly
		}
		return err
	})
	if errors.Is(err, errNoCoordinator) {
		return b.recordThreadDirect(ctx, thread, rolloutID)
	}
	if err != nil {
		return "", fmt.Errorf("stream: THREADS %s: %w", thread, err)
	}
	var r recordReply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return "", fmt.Errorf("stream: THREADS %s: coordinator reply: %w", thread, err)
	}
	if r.Error != "" {
		return "", fmt.Errorf("%w: THREADS %s: %s", ErrRecordRefused, thread, r.Error)
	}
	return r.Rollout, nil
}

var errNoCoordinator = errors.New("stream: no coordinator answers " + SubjectRecordThread)

func (b *Bus) recordThreadDirect(ctx context.Context, thread, rolloutID string) (string, error) {
	err := b.retry(ctx, "threads create", func(ctx context.Context) error {
		_, err := b.threads.Create(ctx, thread, []byte(rolloutID))
		return err
	})
	if err == nil {
		return rolloutID, nil
	}
	var e interface{ Value() []byte }
	if gerr := b.retry(ctx, "threads get", func(ctx context.Context) (err error) { e, err = b.threads.Get(ctx, thread); return err }); gerr != nil || len(e.Value()) == 0 {
		return "", fmt.Errorf("stream: THREADS %s: %w", thread, err)
	}
	return string(e.Value()), nil
}

// errStop ends a ValidPacks walk after the first pack.
var errStop = errors.New("stop")

// checkFirstRecord checks that the first valid pack of rolloutID starts with
// the canonical session_meta of thread: only a rollout that says it is the
// thread's first gets recorded as the thread's.
func (b *Bus) checkFirstRecord(ctx context.Context, thread, rolloutID string) error {
	var first *Packed
	_, _, err := b.ValidPacks(ctx, rolloutID, func(p *Packed) error { first = p; return errStop })
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if first == nil {
		return fmt.Errorf("rollout %s has no valid record on the bus", rolloutID)
	}
	r, err := rollout.DecodeLine(first.Lines[0])
	if err != nil {
		return err
	}
	if r.Type != rollout.TypeSessionMeta {
		return fmt.Errorf("rollout %s starts with a %s, not a session_meta", rolloutID, r.Type)
	}
	m, err := rollout.Decode[rollout.SessionMeta](&r)
	if err != nil {
		return err
	}
	if m.ID != thread || m.Rollout() != rolloutID {
		return fmt.Errorf("rollout %s's session_meta names thread %s, not %s", rolloutID, m.ID, thread)
	}
	return nil
}

// ServeThreadRecords answers SubjectRecordThread until the returned
// subscription is drained or unsubscribed: it checks the request (valid
// IDs, the rollout's first valid record is the thread's canonical
// session_meta) and records the thread in THREADS, create-only, so an
// existing pointer is never changed through it.
//
// Requests are answered recordConcurrency at a time (a subscription
// delivers its messages one after another; each answer is a few bus round
// trips, and an import of many threads asks once a file). Two requests for
// one thread at once are safe: the create is atomic, and the one that
// loses reads the winner's rollout back.
func (b *Bus) ServeThreadRecords(log *slog.Logger) (*nats.Subscription, error) {
	if log == nil {
		log = b.log
	}
	slots := make(chan struct{}, recordConcurrency)
	return b.nc.QueueSubscribe(SubjectRecordThread, recordQueue, func(m *nats.Msg) {
		slots <- struct{}{} // when all are busy, the next request waits here
		go func() {
			defer func() { <-slots }()
			b.serveRecord(log, m)
		}()
	})
}

// recordConcurrency is how many thread records a coordinator answers at once.
const recordConcurrency = 64

func (b *Bus) serveRecord(log *slog.Logger, m *nats.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*b.callTimeout)
	defer cancel()
	reply := b.answerRecord(ctx, m.Data)
	if reply.Error != "" {
		log.Warn("thread record refused", "err", reply.Error)
	}
	out, _ := json.Marshal(reply)
	if err := m.Respond(out); err != nil {
		log.Warn("thread record: reply failed", "err", err)
	}
}

func (b *Bus) answerRecord(ctx context.Context, data []byte) recordReply {
	var req recordRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return recordReply{Error: fmt.Sprintf("request is not JSON {thread, rollout}: %v", err)}
	}
	for _, id := range [][2]string{{"thread id", req.Thread}, {"rollout id", req.Rollout}} {
		if err := rollout.ValidateID(id[0], id[1]); err != nil {
			return recordReply{Error: err.Error()}
		}
	}
	if b.answering != nil {
		b.answering(req.Thread)
	}
	if e, err := b.threads.Get(ctx, req.Thread); err == nil && len(e.Value()) > 0 {
		return recordReply{Rollout: string(e.Value())} // already recorded: unchanged
	}
	if err := b.checkFirstRecord(ctx, req.Thread, req.Rollout); err != nil {
		return recordReply{Error: err.Error()}
	}
	cur, err := b.recordThreadDirect(ctx, req.Thread, req.Rollout)
	if err != nil {
		return recordReply{Error: err.Error()}
	}
	return recordReply{Rollout: cur}
}
