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

// retryBudget bounds, in call timeouts, the retries of a call whose context
// has no deadline (30 s with the default call timeout).
const retryBudget = 6

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

// retry runs call, each attempt bounded by the call timeout, until it
// succeeds, fails for good, or ctx ends (a ctx without a deadline ends
// after retryBudget call timeouts); transient failures are retried with
// backoff. When ctx ends the last failure is returned with it, so the
// error says what the bus was doing (quorum lost reads as "no responders"
// or "timeout" again and again).
func (b *Bus) retry(ctx context.Context, what string, call func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		// No deadline given (a cleanup, a release on the way out): retries
		// still end, after retryBudget call timeouts.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, retryBudget*b.callTimeout)
		defer cancel()
	}
	delay := retryMin
	for attempt := 1; ; attempt++ {
		cctx, cancel := b.callCtx(ctx)
		err := call(cctx)
		cancel()
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
