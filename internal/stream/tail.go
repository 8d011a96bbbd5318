package stream

import (
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

// checkPackLines checks every line of a pack: a record with the ordinal its
// place says and a crc that matches.
func checkPackLines(p *Packed) (rollout.Record, error) {
	var rec rollout.Record
	for i, line := range p.Lines {
		r, err := rollout.DecodeLine(line)
		if err != nil {
			return rec, err
		}
		if r.Ordinal != p.First+int64(i) || r.CRC == "" || !r.CRCOK() {
			return rec, fmt.Errorf("%w: ordinal %d", rollout.ErrCorruptLine, p.First+int64(i))
		}
		rec = r
	}
	return rec, nil
}

// ValidTail reads a rollout's packs in stream order (next-message-by-subject
// gets through the leader, no consumer) and returns the last valid pack's
// tail and last record: ordinals continuous from 1, epochs never decreasing
// (Tail.Follows), no epoch above the last lease revision issued
// (LeaseRevision), every pack and record check passing. Packs that fail are
// skipped, never taken as the tail. last is the subject's last stream
// sequence, valid or not, which a publish must expect.
func (b *Bus) ValidTail(ctx context.Context, rolloutID string) (tail Tail, rec rollout.Record, last uint64, err error) {
	subj := RolloutSubject(rolloutID)
	issued, err := b.LeaseRevision(ctx)
	if err != nil {
		return tail, rec, last, fmt.Errorf("stream: tail of rollout %s: %w", rolloutID, err)
	}
	for seq := uint64(1); ; {
		m, err := b.getMsg(ctx, seq, "", subj)
		if errors.Is(err, errNoMsg) {
			return tail, rec, last, nil
		}
		if err != nil {
			return tail, rec, last, fmt.Errorf("stream: tail of rollout %s: %w", rolloutID, err)
		}
		last, seq = m.Seq, m.Seq+1
		p, err := DecodePack(m.Subject, m.Seq, m.Header, m.Data)
		if err != nil || p.Epoch > issued || tail.Follows(p) != nil {
			continue
		}
		r, err := checkPackLines(p)
		if err != nil {
			continue
		}
		tail, rec = Tail{Seq: m.Seq, Ordinal: p.Last, Epoch: p.Epoch}, r.Clone()
	}
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
