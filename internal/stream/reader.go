package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Entry is one record read from the bus.
type Entry struct {
	Record  rollout.Record // Raw is the exact line as stored
	Ordinal int64
	Seq     uint64 // stream sequence of the message that holds it
	Epoch   uint64 // epoch of the writer that stored it
}

// Reader reads one rollout from the bus, one record at a time, whatever the
// writer packed. It verifies every pack and every record's crc and ordinal.
type Reader struct {
	bus     *Bus
	rollout string
	from    int64  // first ordinal wanted
	expect  int64  // next ordinal expected
	end     uint64 // the rollout's last sequence when the reader opened
	seq     uint64 // the stream sequence to read the next message from
	cur     *Packed
	idx     int
	last    bool // cur is the message at end
	eof     bool
}

// ReadRollout opens a reader at ordinal from (1 for the whole rollout). It
// finds the first message holding that ordinal by binary search over stream
// sequences, then reads message after message of the rollout by
// next-message-by-subject gets from a start sequence: no consumer is
// created, so reading any number of rollouts leaves none behind. Next
// returns io.EOF after the rollout's last message as the stream leader saw
// it at open: everything acknowledged before the call is read, even when the
// consumer runs on a replica that is still catching up.
func (b *Bus) ReadRollout(ctx context.Context, rolloutID string, from int64) (*Reader, error) {
	if err := rollout.ValidateID("rollout id", rolloutID); err != nil {
		return nil, err
	}
	from = max(from, 1)
	r := &Reader{bus: b, rollout: rolloutID, from: from, expect: from}
	subj := RolloutSubject(rolloutID)
	tail, err := b.getMsg(ctx, 0, subj, "")
	if errors.Is(err, errNoMsg) {
		r.eof = true
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream: read rollout %s: %w", rolloutID, err)
	}
	if last, ok := lastOrdinal(tail); ok && last < from {
		r.eof = true
		return r, nil
	}
	r.end = tail.Seq
	start, err := r.search(ctx, subj, tail.Seq)
	if err != nil {
		return nil, err
	}
	r.seq = start
	return r, nil
}

// search returns the smallest sequence s such that the first message of the
// rollout at or after s holds an ordinal >= r.from; the property is monotone
// in s because ordinals grow with sequences.
func (r *Reader) search(ctx context.Context, subj string, hi uint64) (uint64, error) {
	if r.from == 1 {
		return 1, nil
	}
	lo := uint64(1)
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := r.bus.getMsg(ctx, mid, "", subj)
		if err != nil {
			return 0, fmt.Errorf("stream: read rollout %s: find ordinal %d: %w", r.rollout, r.from, err)
		}
		if last, ok := lastOrdinal(m); !ok || last >= r.from {
			hi = mid
		} else {
			lo = m.Seq + 1
		}
	}
	return lo, nil
}

// lastOrdinal reads a message's last ordinal from its header.
func lastOrdinal(m *storedMsg) (int64, bool) {
	n, err := strconv.ParseInt(m.Header.Get(HeaderLast), 10, 64)
	return n, err == nil
}

// Next returns the next record. A damaged message or record is returned as a
// *PackError (wrapping ErrBadPack or a rollout damage class) and skipped:
// call Next again to go on. io.EOF marks the end.
func (r *Reader) Next(ctx context.Context) (Entry, error) {
	for {
		if r.cur != nil && r.idx < len(r.cur.Lines) {
			p, i := r.cur, r.idx
			r.idx++
			ord := p.First + int64(i)
			if ord < r.expect {
				if ord >= r.from {
					return Entry{Ordinal: ord, Seq: p.Seq}, r.damage(p, ord, rollout.ErrOrdinalDuplicate, "ordinal %d again", ord)
				}
				continue
			}
			var gap error
			if ord > r.expect {
				gap = r.damage(p, ord, rollout.ErrOrdinalGap, "ordinals %d-%d missing", r.expect, ord-1)
			}
			r.expect = ord + 1
			rec, err := rollout.DecodeLine(p.Lines[i])
			e := Entry{Record: rec, Ordinal: ord, Seq: p.Seq, Epoch: p.Epoch}
			switch {
			case gap != nil:
				return e, gap // the record after a gap is still valid
			case err != nil:
				return Entry{Ordinal: ord, Seq: p.Seq}, r.damage(p, ord, rollout.ErrCorruptLine, "%v", err)
			case rec.Ordinal != ord:
				return Entry{Ordinal: ord, Seq: p.Seq}, r.damage(p, ord, rollout.ErrCorruptLine, "line has ordinal %d", rec.Ordinal)
			case rec.CRC == "" || !rec.CRCOK():
				return Entry{Ordinal: ord, Seq: p.Seq}, r.damage(p, ord, rollout.ErrCRCMismatch, "crc %q, payload has %s", rec.CRC, rollout.Checksum(rec.Payload))
			}
			return e, nil
		}
		if r.eof || r.last {
			r.eof = true
			return Entry{}, io.EOF
		}
		msg, err := r.bus.getMsg(ctx, r.seq, "", RolloutSubject(r.rollout))
		if errors.Is(err, errNoMsg) {
			r.eof = true
			return Entry{}, io.EOF
		}
		if err != nil {
			return Entry{}, fmt.Errorf("stream: read rollout %s: %w", r.rollout, err)
		}
		r.seq = msg.Seq + 1
		r.last = msg.Seq >= r.end
		p, err := DecodePack(msg.Subject, msg.Seq, msg.Header, msg.Data)
		if err != nil {
			r.cur = nil
			return Entry{Seq: msg.Seq}, err
		}
		r.cur, r.idx = p, 0
	}
}

func (r *Reader) damage(p *Packed, ord int64, kind error, format string, a ...any) error {
	return &PackError{Subject: p.Subject, Seq: p.Seq, Ordinal: ord, Err: fmt.Errorf("%w: "+format, append([]any{kind}, a...)...)}
}

// Close ends the reader; it holds no server resource.
func (r *Reader) Close() {}

// ReadAll reads a whole rollout from ordinal from; the first damage is an
// error. For tests and tools.
func (b *Bus) ReadAll(ctx context.Context, rolloutID string, from int64) ([]Entry, error) {
	r, err := b.ReadRollout(ctx, rolloutID, from)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Entry
	for {
		e, err := r.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}
