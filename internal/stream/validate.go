package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// prepared is a record checked and encoded except for its ordinal.
type prepared struct {
	rec        rollout.Record // Raw cleared unless verbatim
	verbatim   bool           // rec.Raw is written as is (its ordinal is rec.Ordinal)
	meaningful bool           // materializes a deferred rollout
	meta       *rollout.SessionMeta
	size       int // upper bound of the encoded line with its '\n'
}

// prepare checks everything about r that does not depend on its ordinal.
// Every failure wraps ErrInvalidRecord or ErrTooLarge; nothing is written.
func prepare(r rollout.Record, limit int, now func() time.Time) (*prepared, error) {
	p := &prepared{rec: r}
	c := &p.rec
	bad := func(format string, a ...any) (*prepared, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidRecord}, a...)...)
	}
	if c.Timestamp == "" {
		c.Timestamp = now().UTC().Format(rollout.TimeLayout)
	}
	if c.Ordinal < 0 || c.Ordinal > rollout.MaxOrdinal {
		return bad("ordinal %d out of range", c.Ordinal)
	}
	sum := rollout.Checksum(c.Payload)
	if c.CRC != "" && !strings.EqualFold(c.CRC, sum) {
		return bad("%s record: crc %s does not match its payload (%s)", c.Type, c.CRC, sum)
	}
	p.verbatim = c.Raw != nil && c.Ordinal > 0 && c.CRC != ""
	if !p.verbatim {
		c.Raw = nil
		c.CRC = sum
	}
	// Encode without the ordinal and read it back as any reader will.
	probe := *c
	if !p.verbatim {
		probe.Ordinal = 0
	}
	line := probe.Append(nil)
	if bytes.IndexByte(line, '\n') >= 0 {
		return bad("%s record contains a newline outside JSON strings", c.Type)
	}
	p.size = len(line) + 1
	if !p.verbatim {
		p.size += len(`,"ordinal":`) + len(strconv.FormatInt(rollout.MaxOrdinal, 10))
	}
	if len(line)+1 > limit {
		return nil, fmt.Errorf("%w: %s record is %d bytes, the limit is %d", ErrTooLarge, c.Type, len(line)+1, limit)
	}
	dec, err := rollout.DecodeLine(line)
	if err != nil {
		return bad("%v", err)
	}
	if p.verbatim && dec.Ordinal != c.Ordinal {
		return bad("record's line has ordinal %d, its Ordinal field %d", dec.Ordinal, c.Ordinal)
	}
	if !json.Valid(dec.Payload) {
		return bad("%s payload is not valid JSON", c.Type)
	}
	if err := checkIDs(p, &dec); err != nil {
		return nil, err
	}
	return p, nil
}

// checkIDs validates the IDs a record carries that become subject tokens or
// file names, and notes whether the record materializes a rollout.
func checkIDs(p *prepared, r *rollout.Record) error {
	wrap := func(err error) error { return fmt.Errorf("%w: %w", ErrInvalidRecord, err) }
	switch r.Type {
	case rollout.TypeSessionMeta:
		m, err := rollout.Decode[rollout.SessionMeta](r)
		if err != nil {
			return wrap(err)
		}
		if err := m.Validate(); err != nil {
			return wrap(err)
		}
		p.meta = &m
	case rollout.TypeResponseItem:
		p.meaningful = true
	case rollout.TypeEventMsg:
		switch r.EventKind() {
		case rollout.EventUserMessage, rollout.EventTaskStarted, rollout.EventInterAgentReceived:
			p.meaningful = true
		}
		if err := rollout.CheckEventIDs(r); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// encode returns the record's line with ordinal ord and its '\n'.
func (p *prepared) encode(ord int64) []byte {
	if p.verbatim {
		line := make([]byte, 0, len(p.rec.Raw)+1)
		return append(append(line, p.rec.Raw...), '\n')
	}
	r := p.rec
	r.Ordinal = ord
	return append(r.Append(make([]byte, 0, p.size)), '\n')
}
