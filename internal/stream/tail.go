package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// ErrStaleEpoch: a pack carries an epoch lower than one already accepted
// for its rollout (a stale or forged writer). Readers and writers skip it.
var ErrStaleEpoch = errors.New("stream: stale epoch")

// Follows is the valid-tail rule, the one place it is written: pack p is
// accepted after tail t when its ordinals continue t's (p.First ==
// t.Ordinal+1) and its epoch is not lower than t's. The writer finds its
// tail with it (ValidTail) and the mirror applies it to every pack. Errors
// wrap rollout.ErrOrdinalGap, rollout.ErrOrdinalDuplicate or ErrStaleEpoch.
func (t Tail) Follows(p *Packed) error {
	switch {
	case p.First > t.Ordinal+1:
		return fmt.Errorf("%w: ordinals %d-%d after %d", rollout.ErrOrdinalGap, p.First, p.Last, t.Ordinal)
	case p.First <= t.Ordinal:
		return fmt.Errorf("%w: ordinals %d-%d at or before %d", rollout.ErrOrdinalDuplicate, p.First, p.Last, t.Ordinal)
	case p.Epoch < t.Epoch:
		return fmt.Errorf("%w: epoch %d after epoch %d was accepted", ErrStaleEpoch, p.Epoch, t.Epoch)
	}
	return nil
}

// checkPackLines checks every line of a pack as the mirror does: a record
// with the ordinal its place says, a crc that matches, valid IDs
// (CheckRecordIDs), and a canonical session_meta (ordinal 1) naming the
// rollout of the subject.
func checkPackLines(p *Packed) (rollout.Record, error) {
	var rec rollout.Record
	for i, line := range p.Lines {
		r, err := rollout.DecodeLine(line)
		if err != nil {
			return rec, err
		}
		ord := p.First + int64(i)
		if r.Ordinal != ord || r.CRC == "" || !r.CRCOK() {
			return rec, fmt.Errorf("%w: ordinal %d", rollout.ErrCorruptLine, ord)
		}
		meta, err := CheckRecordIDs(&r)
		if err != nil {
			return rec, fmt.Errorf("ordinal %d: %w", ord, err)
		}
		if meta != nil && ord == 1 && RolloutSubject(meta.Rollout()) != p.Subject {
			return rec, fmt.Errorf("%w: canonical session_meta names rollout %q, the subject is %s", ErrInvalidRecord, meta.Rollout(), p.Subject)
		}
		rec = r
	}
	return rec, nil
}

// ValidPacks reads a rollout's packs in stream order through the stream
// leader (next message by subject, one get per message, no consumer) and
// calls fn with each accepted one: it passes the pack and record checks,
// follows the tail so far by the valid-tail rule (Tail.Follows: ordinals
// continuous from 1, epochs never decreasing), and claims no epoch above
// the last lease revision issued (LeaseRevision). Everything else is
// skipped. It returns the last accepted pack's tail and the subject's last
// stream sequence, accepted or not. The writer finds its tail with it, and
// verify compares what it accepts with what the mirror accepted.
func (b *Bus) ValidPacks(ctx context.Context, rolloutID string, fn func(p *Packed) error) (tail Tail, last uint64, err error) {
	return b.ValidPacksFrom(ctx, rolloutID, Tail{}, fn)
}

// ValidPacksFrom is ValidPacks continuing after a tail already accepted
// (from TailAt, or an earlier ValidPacks): it reads only the messages
// stored after from.Seq and judges them by the same rule, starting from
// from. A zero from reads the whole rollout.
func (b *Bus) ValidPacksFrom(ctx context.Context, rolloutID string, from Tail, fn func(p *Packed) error) (tail Tail, last uint64, err error) {
	subj := RolloutSubject(rolloutID)
	tail, last = from, from.Seq
	issued, err := b.LeaseRevision(ctx)
	if err != nil {
		return tail, last, fmt.Errorf("stream: read rollout %s: %w", rolloutID, err)
	}
	for seq := from.Seq + 1; ; {
		m, err := b.getMsg(ctx, seq, "", subj)
		if errors.Is(err, errNoMsg) {
			return tail, last, nil
		}
		if err != nil {
			return tail, last, fmt.Errorf("stream: read rollout %s: %w", rolloutID, err)
		}
		last, seq = m.Seq, m.Seq+1
		p, err := DecodePack(m.Subject, m.Seq, m.Header, m.Data)
		if err != nil || p.Epoch > issued || tail.Follows(p) != nil || b.CheckRecordSizes(p) != nil {
			continue
		}
		if _, err := checkPackLines(p); err != nil {
			continue
		}
		if err := fn(p); err != nil {
			return tail, last, err
		}
		tail = Tail{Seq: m.Seq, Ordinal: p.Last, Epoch: p.Epoch}
	}
}

// ErrNoTailAt: TailAt found no pack on the bus that ends at the ordinal
// with the line asked for (the copy the caller holds is not the bus's).
var ErrNoTailAt = errors.New("stream: no such pack on the bus")

// TailAt finds the message of a rollout whose pack ends at ordinal ord with
// exactly line as its last line (a record a mirror file ends with), checked
// as ValidPacks checks a pack, and returns its tail: ValidPacksFrom that
// tail then reads only what the bus holds past the copy. When ord is the
// bus's last ordinal this is one get (the subject's last message); else a
// binary search over stream sequences by next-message-by-subject gets, no
// consumer. Errors wrap ErrNoTailAt when no such pack is found — the copy
// is ahead of the bus, ends inside a pack, or differs from it — and the
// caller must read the rollout from the start.
func (b *Bus) TailAt(ctx context.Context, rolloutID string, ord int64, line []byte) (Tail, error) {
	subj := RolloutSubject(rolloutID)
	none := func(format string, a ...any) (Tail, error) {
		return Tail{}, fmt.Errorf("%w: rollout %s ordinal %d: "+format, append([]any{ErrNoTailAt, rolloutID, ord}, a...)...)
	}
	issued, err := b.LeaseRevision(ctx)
	if err != nil {
		return Tail{}, fmt.Errorf("stream: read rollout %s: %w", rolloutID, err)
	}
	m, err := b.getMsg(ctx, 0, subj, "")
	if errors.Is(err, errNoMsg) {
		return none("the bus holds nothing of the rollout")
	}
	if err != nil {
		return Tail{}, fmt.Errorf("stream: read rollout %s: %w", rolloutID, err)
	}
	if last, ok := lastOrdinal(m); ok && last == ord {
		if t, err := b.packEndingAt(m, ord, line, issued); err == nil {
			return t, nil
		}
		// Junk last on the subject: look for the pack itself.
	}
	r := &Reader{bus: b, rollout: rolloutID, from: ord}
	seq, err := r.search(ctx, subj, m.Seq)
	if err != nil {
		return Tail{}, err
	}
	if m, err = b.getMsg(ctx, seq, "", subj); err != nil {
		if errors.Is(err, errNoMsg) {
			return none("no message from sequence %d", seq)
		}
		return Tail{}, fmt.Errorf("stream: read rollout %s: %w", rolloutID, err)
	}
	t, err := b.packEndingAt(m, ord, line, issued)
	if err != nil {
		return none("%v", err)
	}
	return t, nil
}

// packEndingAt checks that m is a pack ValidPacks could accept that ends at
// ordinal ord with line.
func (b *Bus) packEndingAt(m *storedMsg, ord int64, line []byte, issued uint64) (Tail, error) {
	p, err := DecodePack(m.Subject, m.Seq, m.Header, m.Data)
	switch {
	case err != nil:
		return Tail{}, fmt.Errorf("sequence %d: %w", m.Seq, err)
	case p.Last != ord || !bytes.Equal(p.Lines[len(p.Lines)-1], line):
		return Tail{}, fmt.Errorf("the pack at sequence %d (ordinals %d-%d) does not end with that line", m.Seq, p.First, p.Last)
	case p.Epoch > issued:
		return Tail{}, fmt.Errorf("sequence %d claims epoch %d, above any lease issued (%d)", m.Seq, p.Epoch, issued)
	}
	if err := b.CheckRecordSizes(p); err != nil {
		return Tail{}, fmt.Errorf("sequence %d: %w", m.Seq, err)
	}
	if _, err := checkPackLines(p); err != nil {
		return Tail{}, fmt.Errorf("sequence %d: %w", m.Seq, err)
	}
	return Tail{Seq: m.Seq, Ordinal: p.Last, Epoch: p.Epoch}, nil
}

// ValidTail returns a rollout's valid tail (ValidPacks), the record at it,
// and the subject's last stream sequence, which a publish must expect.
func (b *Bus) ValidTail(ctx context.Context, rolloutID string) (tail Tail, rec rollout.Record, last uint64, err error) {
	var lastLine []byte
	tail, last, err = b.ValidPacks(ctx, rolloutID, func(p *Packed) error {
		lastLine = p.Lines[len(p.Lines)-1]
		return nil
	})
	if err != nil || lastLine == nil {
		return tail, rec, last, err
	}
	rec, err = rollout.DecodeLine(lastLine)
	return tail, rec.Clone(), last, err
}

// LeaseRevision is the last revision of the LEASES bucket: no lease ever
// issued has a higher epoch, so a pack claiming one is forged (the mirror
// quarantines it as future_epoch, the writer skips it).
func (b *Bus) LeaseRevision(ctx context.Context) (uint64, error) {
	st, err := b.leases.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream: bucket %s: %w", BucketLeases, err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return 0, fmt.Errorf("stream: bucket %s: no stream state", BucketLeases)
	}
	return bs.StreamInfo().State.LastSeq, nil
}

// CheckRecordSizes refuses a pack holding a record line (with its '\n')
// over the record limit: the one limit, which Append enforces before
// publishing and the mirror and ValidPacks enforce on what they read, so a
// record no writer would send is never accepted from the bus either.
// Errors wrap ErrTooLarge.
func (b *Bus) CheckRecordSizes(p *Packed) error {
	for i, line := range p.Lines {
		if len(line)+1 > b.recordLimit {
			return fmt.Errorf("%w: ordinal %d is %d bytes, the limit is %d", ErrTooLarge, p.First+int64(i), len(line)+1, b.recordLimit)
		}
	}
	return nil
}
