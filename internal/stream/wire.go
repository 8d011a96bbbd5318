package stream

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Names on the bus. Part of the wire format: do not change.
const (
	StreamRollouts = "ROLLOUTS" // stream of rollout.<rollout_id>
	StreamMail     = "MAIL"     // stream of mail.<thread_id>
	BucketThreads  = "THREADS"  // KV: thread id -> current rollout id
	BucketLeases   = "LEASES"   // KV: thread id -> lease value; revision = epoch

	rolloutPrefix = "rollout."
	mailPrefix    = "mail."
)

// Pack headers. Part of the wire format: do not change, add to it.
const (
	HeaderMsgID  = "Nats-Msg-Id"   // <rollout_id>:<first>-<last>:<epoch>
	HeaderPack   = "Logbook-Pack"  // pack format version, "1"
	HeaderFirst  = "Logbook-First" // ordinal of the first line
	HeaderLast   = "Logbook-Last"  // ordinal of the last line
	HeaderEpoch  = "Logbook-Epoch" // the writer's lease epoch
	HeaderCRC    = "Logbook-CRC"   // CRC-32C of the whole payload, 8 hex digits
	packVersion1 = "1"             // the only pack format so far
)

// RolloutSubject is the subject a rollout is published on.
func RolloutSubject(rolloutID string) string { return rolloutPrefix + rolloutID }

// MailSubject is the subject of a thread's mailbox.
func MailSubject(threadID string) string { return mailPrefix + threadID }

// MsgID is the Nats-Msg-Id of a pack: the epoch makes the ids of two writers
// differ even for the same ordinals (see the package doc, Fencing).
func MsgID(rolloutID string, first, last int64, epoch uint64) string {
	return rolloutID + ":" + strconv.FormatInt(first, 10) + "-" + strconv.FormatInt(last, 10) + ":" + strconv.FormatUint(epoch, 10)
}

// ParseMsgID splits a pack's Nats-Msg-Id.
func ParseMsgID(id string) (rolloutID string, first, last int64, epoch uint64, err error) {
	bad := func() (string, int64, int64, uint64, error) {
		return "", 0, 0, 0, fmt.Errorf("%w: msg id %q is not <rollout_id>:<first>-<last>:<epoch>", ErrBadPack, id)
	}
	i := strings.IndexByte(id, ':')
	j := strings.LastIndexByte(id, ':')
	if i <= 0 || j <= i {
		return bad()
	}
	rolloutID = id[:i]
	span, ep := id[i+1:j], id[j+1:]
	k := strings.IndexByte(span, '-')
	if k <= 0 {
		return bad()
	}
	if first, err = strconv.ParseInt(span[:k], 10, 64); err != nil {
		return bad()
	}
	if last, err = strconv.ParseInt(span[k+1:], 10, 64); err != nil {
		return bad()
	}
	if epoch, err = strconv.ParseUint(ep, 10, 64); err != nil {
		return bad()
	}
	if first < 1 || last < first {
		return bad()
	}
	return rolloutID, first, last, epoch, nil
}

// pack is one message of a rollout: consecutive lines, each '\n'-terminated.
type pack struct {
	rollout     string
	first, last int64
	epoch       uint64
	data        []byte
}

// msg builds the message for p. The expected last subject sequence is set
// per attempt by the publisher.
func (p *pack) msg() *nats.Msg {
	m := nats.NewMsg(RolloutSubject(p.rollout))
	m.Data = p.data
	m.Header.Set(HeaderMsgID, MsgID(p.rollout, p.first, p.last, p.epoch))
	m.Header.Set(HeaderPack, packVersion1)
	m.Header.Set(HeaderFirst, strconv.FormatInt(p.first, 10))
	m.Header.Set(HeaderLast, strconv.FormatInt(p.last, 10))
	m.Header.Set(HeaderEpoch, strconv.FormatUint(p.epoch, 10))
	m.Header.Set(HeaderCRC, rollout.Checksum(p.data))
	return m
}

// headerReserve is the room kept in a message for headers: ours are a few
// hundred bytes; the rest is margin for what the client and server add.
const headerReserve = 8 << 10

// Packed is a message of ROLLOUTS decoded: its header fields and its lines.
type Packed struct {
	Subject string
	Seq     uint64 // stream sequence
	MsgID   string
	Epoch   uint64
	First   int64
	Last    int64
	Lines   [][]byte // without '\n', sub-slices of the message data
}

// DecodePack checks a ROLLOUTS message against the pack format: version,
// ordinal headers, msg id, payload CRC, and one '\n'-terminated line per
// ordinal from First to Last. It does not decode the records.
func DecodePack(subject string, seq uint64, h nats.Header, data []byte) (*Packed, error) {
	p := &Packed{Subject: subject, Seq: seq}
	fail := func(format string, a ...any) (*Packed, error) {
		return p, &PackError{Subject: subject, Seq: seq, Err: fmt.Errorf("%w: "+format, append([]any{ErrBadPack}, a...)...)}
	}
	if !strings.HasPrefix(subject, rolloutPrefix) {
		return fail("subject %q is not rollout.<id>", subject)
	}
	rid := subject[len(rolloutPrefix):]
	if err := rollout.ValidateID("rollout id", rid); err != nil {
		return fail("%v", err)
	}
	switch v := h.Get(HeaderPack); v {
	case packVersion1:
	case "":
		return fail("no %s header", HeaderPack)
	default:
		return fail("pack format %q is newer than this reader (%s)", v, packVersion1)
	}
	var err error
	if p.First, err = strconv.ParseInt(h.Get(HeaderFirst), 10, 64); err != nil || p.First < 1 {
		return fail("%s %q", HeaderFirst, h.Get(HeaderFirst))
	}
	if p.Last, err = strconv.ParseInt(h.Get(HeaderLast), 10, 64); err != nil || p.Last < p.First {
		return fail("%s %q", HeaderLast, h.Get(HeaderLast))
	}
	if p.Epoch, err = strconv.ParseUint(h.Get(HeaderEpoch), 10, 64); err != nil {
		return fail("%s %q", HeaderEpoch, h.Get(HeaderEpoch))
	}
	p.MsgID = h.Get(HeaderMsgID)
	if want := MsgID(rid, p.First, p.Last, p.Epoch); p.MsgID != want {
		return fail("msg id %q does not match its headers (want %q)", p.MsgID, want)
	}
	if c := h.Get(HeaderCRC); c != rollout.Checksum(data) {
		return fail("payload crc %s, header says %q", rollout.Checksum(data), c)
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return fail("payload is not '\\n'-terminated")
	}
	n := int64(bytes.Count(data, []byte{'\n'}))
	if n != p.Last-p.First+1 {
		return fail("%d lines for ordinals %d-%d", n, p.First, p.Last)
	}
	p.Lines = make([][]byte, 0, n)
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		p.Lines = append(p.Lines, data[:i:i])
		data = data[i+1:]
	}
	return p, nil
}

// PackError is a ROLLOUTS message that is not a valid pack, or a line of one
// that is not a valid record.
type PackError struct {
	Subject string
	Seq     uint64
	Ordinal int64 // 0 when the whole message is bad
	Err     error
}

func (e *PackError) Error() string {
	loc := fmt.Sprintf("%s seq %d", e.Subject, e.Seq)
	if e.Ordinal > 0 {
		loc += fmt.Sprintf(" ordinal %d", e.Ordinal)
	}
	return loc + ": " + e.Err.Error()
}

func (e *PackError) Unwrap() error { return e.Err }

// ErrBadPack is wrapped by DecodePack for a message that breaks the pack format.
var ErrBadPack = errors.New("stream: not a valid pack")
