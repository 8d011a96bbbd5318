package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// ErrMoved is returned by AppendAt when the rollout's tail is no longer the
// one the caller read: someone appended in between.
var ErrMoved = errors.New("stream: the rollout moved on since its tail was read")

// AppendAt appends one record to a rollout outside any Writer, fenced by the
// tail the caller read: it lands only if nothing was appended since. It is
// how a revert seals the rollout it replaces (a concurrent writer's next
// publish then fails and that writer stops) and how the coordinator writes
// an idle thread's markers. rec must carry the ordinal after expect's; the
// epoch goes into the msg id (use the caller's lease epoch, or 0). An
// unclear outcome is resolved by reading what is stored, as a Writer does.
func (b *Bus) AppendAt(ctx context.Context, rolloutID string, expect Tail, rec rollout.Record, epoch uint64) (Tail, error) {
	if rec.Ordinal != expect.Ordinal+1 {
		return Tail{}, fmt.Errorf("%w: rollout %s: ordinal %d does not follow the tail's %d", ErrWrongOrdinal, rolloutID, rec.Ordinal, expect.Ordinal)
	}
	if _, err := prepare(rec, b.recordLimit, time.Now); err != nil {
		return Tail{}, err
	}
	// Never below the tail's epoch: the valid-tail rule (Tail.Follows) would
	// refuse a pack that lowers it.
	epoch = max(epoch, expect.Epoch)
	p := &pack{rollout: rolloutID, first: rec.Ordinal, last: rec.Ordinal, epoch: epoch, data: rec.Encode()}
	m := p.msg()
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect.Seq, 10))
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(50<<attempt) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return Tail{}, ctx.Err()
			case <-t.C:
			}
		}
		actx, cancel := b.callCtx(ctx)
		ack, err := b.js.PublishMsg(actx, m, jetstream.WithRetryAttempts(0))
		cancel()
		if err == nil && !ack.Duplicate {
			return Tail{Seq: ack.Sequence, Ordinal: rec.Ordinal, Epoch: epoch}, nil
		}
		if permanent(err) {
			return Tail{}, fmt.Errorf("rollout %s ordinal %d: refused by the server: %w", rolloutID, rec.Ordinal, err)
		}
		got, gerr := b.getMsg(ctx, expect.Seq+1, "", RolloutSubject(rolloutID))
		switch {
		case errors.Is(gerr, errNoMsg):
			last = err // not stored: retry
		case gerr != nil:
			last = gerr
		case got.Header.Get(HeaderMsgID) == m.Header.Get(HeaderMsgID) && bytes.Equal(got.Data, p.data):
			return Tail{Seq: got.Seq, Ordinal: rec.Ordinal, Epoch: epoch}, nil
		default:
			return Tail{}, fmt.Errorf("%w: rollout %s: expected ordinal %d after sequence %d, found %s at sequence %d",
				ErrMoved, rolloutID, rec.Ordinal, expect.Seq, got.Header.Get(HeaderMsgID), got.Seq)
		}
	}
	return Tail{}, fmt.Errorf("rollout %s ordinal %d: %w", rolloutID, rec.Ordinal, last)
}

// LastRecord returns the last record of a rollout on the bus and its tail;
// a zero Tail for an empty rollout. It reads from the stream leader.
func (b *Bus) LastRecord(ctx context.Context, rolloutID string) (rollout.Record, Tail, error) {
	subj := RolloutSubject(rolloutID)
	m, err := b.getMsg(ctx, 0, subj, "")
	if errors.Is(err, errNoMsg) {
		return rollout.Record{}, Tail{}, nil
	}
	if err != nil {
		return rollout.Record{}, Tail{}, fmt.Errorf("stream: tail of rollout %s: %w", rolloutID, err)
	}
	p, err := DecodePack(m.Subject, m.Seq, m.Header, m.Data)
	if err != nil {
		return rollout.Record{}, Tail{Seq: m.Seq}, err
	}
	rec, err := rollout.DecodeLine(p.Lines[len(p.Lines)-1])
	if err != nil {
		return rollout.Record{}, Tail{Seq: m.Seq}, fmt.Errorf("stream: rollout %s sequence %d: %w", rolloutID, m.Seq, err)
	}
	return rec.Clone(), Tail{Seq: m.Seq, Ordinal: p.Last, Epoch: p.Epoch}, nil
}
