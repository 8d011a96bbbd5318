package rollout

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrSyntax is wrapped by DecodeLine for a line that is not a valid record.
var ErrSyntax = errors.New("rollout: invalid record")

// MaxOrdinal keeps ordinals exact in every JSON reader (2^53).
const MaxOrdinal = 1 << 53

// DecodeLine decodes one line (without its '\n'). The returned Record shares
// no memory with line except through Raw, Payload and Extra, which are
// sub-slices of it: callers that reuse the buffer must Clone.
func DecodeLine(line []byte) (Record, error) {
	if !utf8.Valid(line) {
		return Record{}, fmt.Errorf("%w: invalid UTF-8", ErrSyntax)
	}
	var r Record
	var seen [5]bool
	err := eachMember(line, func(key, val []byte) error {
		slot := -1
		switch {
		case keyEquals(key, "timestamp"):
			slot = 0
			s, ok := rawString(val)
			if !ok {
				return fmt.Errorf("timestamp is not a string")
			}
			r.Timestamp = s
		case keyEquals(key, "ordinal"):
			slot = 1
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil || n < 1 || n > MaxOrdinal {
				return fmt.Errorf("ordinal %s is not an integer from 1 to 2^53", clip(val))
			}
			r.Ordinal = n
		case keyEquals(key, "type"):
			slot = 2
			s, ok := internType(val)
			if !ok || s == "" {
				return fmt.Errorf("type is not a non-empty string")
			}
			r.Type = s
		case keyEquals(key, "payload"):
			slot = 3
			r.Payload = val
		case keyEquals(key, "crc"):
			slot = 4
			s, ok := rawString(val)
			if !ok || len(s) != 8 || !isHex8(s) {
				return fmt.Errorf("crc %s is not 8 hex digits", clip(val))
			}
			r.CRC = s
		default:
			r.Extra = append(r.Extra, Field{Key: key, Value: val})
			return nil
		}
		if seen[slot] {
			return fmt.Errorf("duplicate key %s", key)
		}
		seen[slot] = true
		return nil
	})
	if err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if r.Type == "" {
		return Record{}, fmt.Errorf("%w: no type", ErrSyntax)
	}
	if r.Payload == nil {
		return Record{}, fmt.Errorf("%w: no payload", ErrSyntax)
	}
	if KnownType(r.Type) && (len(r.Payload) == 0 || r.Payload[0] != '{') {
		return Record{}, fmt.Errorf("%w: %s payload is not an object", ErrSyntax, r.Type)
	}
	if k := duplicateKey(r.Payload); k != nil {
		// Lookup takes the first copy, encoding/json the last: refuse both.
		return Record{}, fmt.Errorf("%w: payload: duplicate key %s", ErrSyntax, clip(k))
	}
	r.Raw = line
	return r, nil
}

// internType decodes a record type, without allocating for the known ones.
func internType(v []byte) (string, bool) {
	switch string(v) { // no allocation: the compiler compares in place
	case `"event_msg"`:
		return TypeEventMsg, true
	case `"response_item"`:
		return TypeResponseItem, true
	case `"turn_context"`:
		return TypeTurnContext, true
	case `"world_state"`:
		return TypeWorldState, true
	case `"compacted"`:
		return TypeCompacted, true
	case `"session_meta"`:
		return TypeSessionMeta, true
	}
	return rawString(v)
}

func isHex8(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func clip(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}

// Clone returns a copy of r that shares no memory with the buffer it was
// decoded from.
func (r Record) Clone() Record {
	c := r
	if r.Raw != nil {
		// Re-slice everything into one copy of the line.
		line := bytes.Clone(r.Raw)
		c.Raw = line
		c.Payload = rebase(line, r.Raw, r.Payload)
		if len(r.Extra) > 0 {
			c.Extra = make([]Field, len(r.Extra))
			for i, f := range r.Extra {
				c.Extra[i] = Field{Key: rebase(line, r.Raw, f.Key), Value: rebase(line, r.Raw, f.Value)}
			}
		}
		return c
	}
	c.Payload = bytes.Clone(r.Payload)
	if len(r.Extra) > 0 {
		c.Extra = make([]Field, len(r.Extra))
		for i, f := range r.Extra {
			c.Extra[i] = Field{Key: bytes.Clone(f.Key), Value: bytes.Clone(f.Value)}
		}
	}
	return c
}

// rebase maps sub, a sub-slice of old, onto the same position in cur.
func rebase(cur, old, sub []byte) []byte {
	if sub == nil {
		return nil
	}
	if len(sub) == 0 {
		return []byte{}
	}
	// Find sub's offset within old by pointer arithmetic on capacity.
	off := cap(old) - cap(sub)
	if off < 0 || off+len(sub) > len(old) || &old[off] != &sub[0] {
		return bytes.Clone(sub)
	}
	return cur[off : off+len(sub) : off+len(sub)]
}

// Append appends the record's line, without '\n'. A decoded record is written
// exactly as it was read; a built one in canonical member order.
func (r *Record) Append(dst []byte) []byte {
	if r.Raw != nil {
		return append(dst, r.Raw...)
	}
	dst = append(dst, `{"timestamp":`...)
	dst = appendQuoted(dst, r.Timestamp)
	if r.Ordinal > 0 {
		dst = append(dst, `,"ordinal":`...)
		dst = strconv.AppendInt(dst, r.Ordinal, 10)
	}
	dst = append(dst, `,"type":`...)
	dst = appendQuoted(dst, r.Type)
	dst = append(dst, `,"payload":`...)
	dst = append(dst, r.Payload...)
	for _, f := range r.Extra {
		dst = append(dst, ',')
		dst = append(dst, f.Key...)
		dst = append(dst, ':')
		dst = append(dst, f.Value...)
	}
	if r.CRC != "" {
		dst = append(dst, `,"crc":"`...)
		dst = append(dst, r.CRC...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// Encode returns the record's line with its '\n'.
func (r *Record) Encode() []byte {
	return append(r.Append(nil), '\n')
}

// Reenvelope returns a copy of r with a new ordinal and a computed crc, its
// payload and unknown envelope fields kept byte for byte (import does this to
// Codex lines).
func (r Record) Reenvelope(ordinal int64) Record {
	c := r.Clone()
	c.Raw = nil
	c.Ordinal = ordinal
	c.CRC = Checksum(c.Payload)
	return c
}
