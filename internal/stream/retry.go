package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultCallTimeout bounds one bus call (a publish, a message get, a KV
// create, update, get or delete) when Options.CallTimeout is 0. It is longer
// than a cluster's leader election (a few hundred ms on a LAN) and shorter
// than any command's --timeout, so a call that would never be answered is
// retried against the new leader instead of waiting for ever.
const DefaultCallTimeout = 5 * time.Second

// unavailableCalls is Options.UnavailableAfter when 0, in call timeouts:
// DefaultUnavailableAfter with the default call timeout.
const unavailableCalls = 4

// DefaultUnavailableAfter bounds how long one call keeps retrying transient
// failures with the default call timeout, whatever the caller's deadline:
// longer than a leader election under load and a client's reconnect to
// another node, short enough that a cluster without quorum is reported
// within seconds (as ErrBusUnavailable) instead of at the end of a
// command's --timeout. A call whose context has no deadline is bounded by it
// too.
const DefaultUnavailableAfter = unavailableCalls * DefaultCallTimeout

// Backoff between retries of a transient failure.
const (
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

// callCtx bounds one call by the bus's call timeout within ctx.
func (b *Bus) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.callTimeout)
}

// transient reports a failure that a retry against a newly elected leader
// can cure: no responders, a call that timed out, the JetStream API saying
// it is unavailable (HTTP-style 503: no leader, no quorum yet), 10158 (a
// msg id still in process) and 10163 (right after a leader change).
func transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrNoHeartbeat) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.Code == 503 || api.ErrorCode == 10158 || api.ErrorCode == 10163)
}

// Call runs one bus call: each attempt is bounded by the call timeout
// (Options.CallTimeout), and transient failures (see transient) are retried
// with backoff against whichever node now leads, until the call succeeds,
// fails for good, ctx ends, or the failures have lasted UnavailableAfter.
// Giving up returns ErrBusUnavailable wrapping the last failure, so the
// error says what the bus was doing; a closed connection is
// ErrBusUnavailable at once. Every call the project makes to the bus goes
// through Call (or a Bus method, or Threads(), that does).
//
// call must be safe to repeat: an attempt that timed out may have landed.
// A create or compare-and-swap update retried after its first attempt
// landed reports the key as existing or the revision as changed; the
// callers read the key to tell that from a real conflict.
func (b *Bus) Call(ctx context.Context, what string, call func(context.Context) error) error {
	return b.retry(ctx, what, call)
}

func (b *Bus) retry(ctx context.Context, what string, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, b.unavailableAfter)
	defer cancel()
	delay := retryMin
	for attempt := 1; ; attempt++ {
		cctx, cancel := b.callCtx(ctx)
		err := call(cctx)
		cancel()
		if errors.Is(err, nats.ErrConnectionClosed) {
			return fmt.Errorf("%w: %s: %w", ErrBusUnavailable, what, err)
		}
		if err == nil || !transient(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s: gave up after %d attempts: %w", ErrBusUnavailable, what, attempt, err)
		}
		if attempt == 1 {
			b.log.Warn("bus call failed; retrying", "call", what, "err", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s: gave up after %d attempts: %w", ErrBusUnavailable, what, attempt, err)
		}
		delay = min(2*delay, retryMax)
	}
}

// transientAPIError is the API error in a raw JetStream API reply when it is
// transient, so that retry retries it; nil otherwise (the caller decodes the
// reply and its other errors itself).
func transientAPIError(reply []byte) error {
	var r struct {
		Error *jetstream.APIError `json:"error"`
	}
	if json.Unmarshal(reply, &r) != nil || r.Error == nil || !transient(r.Error) {
		return nil
	}
	return r.Error
}
