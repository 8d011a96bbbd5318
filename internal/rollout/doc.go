// Package rollout owns the record format of a Logbook rollout: one thread's
// append-only canonical log of facts.
//
// # Lines
//
// A rollout is JSONL: one JSON object per line, UTF-8, terminated by '\n'.
// The envelope is the one Codex CLI writes, plus an ordinal and a checksum:
//
//	{"timestamp":"2026-11-29T10:00:00.123Z","ordinal":7,"type":"response_item","payload":{...},"crc":"1c291ca3"}
//
//	timestamp  RFC 3339 string, kept as written
//	ordinal    1, 2, 3 ... per rollout, no gaps; absent only in version-0 (Codex) lines
//	type       session_meta | turn_context | world_state | response_item | compacted | event_msg
//	           (any other type is kept, ignored by replay and counted)
//	payload    the record's body; its bytes are immutable once written
//	crc        CRC-32C (Castagnoli) of the exact payload bytes, 8 lowercase hex digits;
//	           written by Logbook always, verified by every reader when present
//
// Payload bytes are never re-encoded: a Record keeps them as json.RawMessage
// and a Record decoded from a line re-encodes to exactly that line, unknown
// envelope fields and their order included. Everything in this paragraph is
// part of the wire format: do not change it, add to it. A duplicate key, in
// the envelope or at the top of the payload (escapes decoded), makes a line
// invalid: Lookup takes the first copy and encoding/json the last.
//
// # Identity
//
// The first session_meta of a rollout is canonical: it names the thread, the
// rollout and its lineage. Later session_meta records (inherited or copied from
// a parent by a fork) are kept and never change identity. A session_meta
// without schema_version is version 0 (a Codex rollout); Version is the newest
// this reader understands, and a rollout written by a newer version is
// read-only. IDs that become NATS subject tokens or file names (thread, rollout,
// message) must match ^[A-Za-z0-9_-]{1,128}$ (ValidateID).
//
// # Persistence policy
//
// Only canonical facts are persisted. Policy (policy.go) is the one table that
// says which event kinds are transient (deltas, *_begin, approval requests,
// warnings, ...) and are dropped by the writer before they reach the bus.
//
// # Reading and damage
//
// A Log is read forward from any line start or backward from the tail; both
// read .jsonl and .jsonl.zst alike. Every entry carries its line number (when
// the reader knows it) and the byte offset of its line in the uncompressed
// JSONL. Damage is classified, never guessed at:
//
//	ErrTornTail          the last line is unterminated or unparsable: a write cut short;
//	                     ignored on read, truncated (keeping a .broken copy) before an append
//	ErrCorruptLine       an unparsable line with lines after it
//	ErrCRCMismatch       a line whose payload does not match its crc
//	ErrOrdinalGap        ordinals jump forward: records are missing before this one
//	ErrOrdinalDuplicate  an ordinal not above the previous one
//	ErrMissingOrdinal    a line without an ordinal in a rollout that has them
//
// Readers return a *CorruptionError for each damaged line and go on; callers
// decide whether the damage matters (see package replay).
//
// Ordinals are checked between intact records. A damaged line in between
// accounts for one missing ordinal, so an ordinal gap means records lost
// without a trace (one finding per lost line); the gap is reported just
// before the record after it, which is still returned. Whether a rollout
// carries ordinals at all is decided by its first intact record, read from
// the head whichever way and from wherever the log is read: if it has none (a
// version-0 rollout), ordinals are not checked. So a backward read yields
// the records of a forward read in opposite order and reports the same
// damage (without line numbers; it reports a gap once it finds the record
// before it, so after the damaged lines in between), and a forward read from
// any line start yields the rest of the read from the head (less a gap
// before its first record, which it cannot see).
// The one exception is ordinals that go back: each direction drops the
// records whose ordinal is not above (forward) or below (backward) every one
// it has let through, so both report a duplicate, not always on one line.
//
// # Compressed rollouts
//
// Cold rollouts are stored as .jsonl.zst in the zstd seekable format: data
// frames that each hold whole lines (about FrameBytes of them; a longer line
// gets a frame of its own), followed by a seek-table skippable frame.
// Any zstd decoder reads them as plain JSONL; this package uses the seek table
// to read the tail without decompressing the whole file. Files without a seek
// table are read too, by decompressing them whole. A seek table that does not
// describe the file's frames is an error wrapping ErrSeekTable.
package rollout
