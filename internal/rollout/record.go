package rollout

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"regexp"
	"strconv"
	"time"
)

// Version is the newest schema_version this package reads and writes. A
// rollout whose canonical session_meta names a newer one is read-only.
const Version = 1

// Record types. Part of the wire format: do not change.
const (
	TypeSessionMeta  = "session_meta"
	TypeTurnContext  = "turn_context"
	TypeWorldState   = "world_state"
	TypeResponseItem = "response_item"
	TypeCompacted    = "compacted"
	TypeEventMsg     = "event_msg"
)

// KnownType reports whether t is a record type replay interprets.
func KnownType(t string) bool {
	switch t {
	case TypeSessionMeta, TypeTurnContext, TypeWorldState, TypeResponseItem, TypeCompacted, TypeEventMsg:
		return true
	}
	return false
}

// TimeLayout is the timestamp layout Logbook writes.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Field is an envelope member this package does not know, kept in order.
type Field struct {
	Key   json.RawMessage // the key with its quotes, as written
	Value json.RawMessage
}

// Record is one line of a rollout.
//
// A Record returned by DecodeLine keeps the exact line in Raw, and Append
// writes Raw verbatim while it is set. Code that changes a decoded Record's
// fields must clear Raw (or build a new Record with New).
type Record struct {
	Timestamp string
	Ordinal   int64 // 0: absent (version-0 line)
	Type      string
	Payload   json.RawMessage
	CRC       string // "" when absent
	Extra     []Field
	Raw       []byte // the line as read, without its '\n'
}

// New builds a record with its CRC computed. ts is formatted with TimeLayout
// in UTC.
func New(ts time.Time, ordinal int64, typ string, payload []byte) Record {
	return Record{
		Timestamp: ts.UTC().Format(TimeLayout),
		Ordinal:   ordinal,
		Type:      typ,
		Payload:   payload,
		CRC:       Checksum(payload),
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the crc field for a payload: CRC-32C of its exact bytes as 8
// lowercase hex digits.
func Checksum(payload []byte) string {
	const hex = "0123456789abcdef"
	v := crc32.Checksum(payload, castagnoli)
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = hex[v&0xf]
		v >>= 4
	}
	return string(b[:])
}

// CRCOK reports whether the record's crc, if present, matches its payload.
func (r *Record) CRCOK() bool {
	if r.CRC == "" {
		return true
	}
	want := Checksum(r.Payload)
	if len(r.CRC) != 8 {
		return false
	}
	for i := 0; i < 8; i++ {
		c := r.CRC[i]
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}

// EventKind returns payload.type of an event_msg or response_item ("" for
// other types or when absent).
func (r *Record) EventKind() string {
	if r.Type != TypeEventMsg && r.Type != TypeResponseItem {
		return ""
	}
	s, _ := LookupString(r.Payload, "type")
	return s
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ErrInvalidID is returned (wrapped) for an ID that cannot be a subject token
// or a file name.
var ErrInvalidID = fmt.Errorf("rollout: invalid ID")

// ValidateID checks an ID read from input; field names it in the error.
func ValidateID(field, id string) error {
	if idPattern.MatchString(id) {
		return nil
	}
	shown := id
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	return fmt.Errorf("%w: %s %s must match ^[A-Za-z0-9_-]{1,128}$", ErrInvalidID, field, strconv.Quote(shown))
}
