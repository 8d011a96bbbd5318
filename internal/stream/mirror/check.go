package mirror

import (
	"errors"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// checked is a message that passed every check that does not depend on the
// mirror file: a valid pack of valid records of the rollout its subject
// names.
type checked struct {
	pack    *stream.Packed
	rollout string
	// ref is the rollout the canonical session_meta's history_base names
	// ("" when there is none in this pack).
	ref string
}

// check validates a ROLLOUTS message on its own: the subject, the pack
// format and crc (stream.DecodePack), then every line: a record, with the
// ordinal its place in the pack says (DecodeLine checks that the line, its
// payload included, is JSON and UTF-8), a crc that matches, valid IDs (stream.CheckRecordIDs), and a canonical session_meta
// (ordinal 1) naming this rollout.
func check(subject string, seq uint64, h nats.Header, data []byte) (*checked, *refusal) {
	rid, ok := strings.CutPrefix(subject, "rollout.")
	if !ok {
		return nil, refuse(KindBadPack, "subject %q is not rollout.<id>", clipSubject(subject))
	}
	if err := rollout.ValidateID("rollout id", rid); err != nil {
		return nil, refuse(KindInvalidID, "subject: %v", err)
	}
	p, err := stream.DecodePack(subject, seq, h, data)
	if err != nil {
		if c := h.Get(stream.HeaderCRC); c != "" && h.Get(stream.HeaderPack) != "" && c != rollout.Checksum(data) {
			return nil, refuse(KindCRCMismatch, "payload crc %s, %s says %q", rollout.Checksum(data), stream.HeaderCRC, clipSubject(c))
		}
		return nil, refuse(KindBadPack, "%v", unwrapPack(err))
	}
	c := &checked{pack: p, rollout: rid}
	for i, line := range p.Lines {
		ord := p.First + int64(i)
		rec, err := rollout.DecodeLine(line)
		switch {
		case err != nil:
			return nil, refuse(KindBadRecord, "ordinal %d: %v", ord, err)
		case rec.Ordinal != ord:
			return nil, refuse(KindBadRecord, "line %d of the pack holds ordinal %d, its place says %d", i+1, rec.Ordinal, ord)
		case rec.CRC == "":
			return nil, refuse(KindBadRecord, "ordinal %d has no crc", ord)
		case !rec.CRCOK():
			return nil, refuse(KindCRCMismatch, "ordinal %d: crc %s, its payload has %s", ord, rec.CRC, rollout.Checksum(rec.Payload))
		}
		meta, err := stream.CheckRecordIDs(&rec)
		if err != nil {
			if errors.Is(err, rollout.ErrInvalidID) {
				return nil, refuse(KindInvalidID, "ordinal %d: %v", ord, err)
			}
			return nil, refuse(KindBadRecord, "ordinal %d: %v", ord, err)
		}
		if meta != nil && ord == 1 {
			if meta.Rollout() != rid {
				return nil, refuse(KindWrongRollout, "canonical session_meta names rollout %q, the subject %q", meta.Rollout(), rid)
			}
			if meta.HistoryBase != nil {
				c.ref = meta.HistoryBase.RolloutID
			}
		}
	}
	return c, nil
}

// unwrapPack drops the subject and sequence a *stream.PackError repeats.
func unwrapPack(err error) error {
	var pe *stream.PackError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
