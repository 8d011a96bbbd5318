// Package stream owns the bus: how rollouts travel over NATS JetStream
// (DESIGN §5). It sets up the streams and buckets, runs the embedded
// nats-server, hands out writer leases, writes rollouts (bounded queue, group
// commit, the chapter's two barriers, epoch fencing) and reads them back one
// record at a time. The mirror to local JSONL and the zstd cold files are
// the sub-package mirror; `coordinator serve` lives in the sub-package serve.
//
// Everything in the sections "Names", "Packs" and "Leases" is part of the
// wire format: do not change it, add to it.
//
// # Names
//
//	stream ROLLOUTS  subjects rollout.<rollout_id>; limits retention with no
//	                 MaxAge, MaxBytes or MaxMsgs (a log that expires is not a
//	                 log); file storage; Duplicates 2m; AllowDirect; --replicas
//	stream MAIL      subjects mail.<thread_id>; work-queue retention: a message
//	                 is kept until its receiver acknowledges it, then removed
//	                 (so a search of MAIL finds what is still undelivered, never
//	                 what was received); file storage; Duplicates 2m
//	KV THREADS       thread id -> current rollout id; history 1
//	KV LEASES        thread id -> lease value; history 1; bucket TTL = lease TTL
//	request          logbook.api.threads.record: {"thread","rollout"} ->
//	                 {"rollout"} or {"error"}; a coordinator (queue group
//	                 logbook-coordinators) records a new thread in THREADS,
//	                 create-only, when the rollout's first valid record is the
//	                 thread's canonical session_meta. RecordThread uses it and
//	                 writes THREADS itself only when no coordinator answers,
//	                 so agents need no THREADS writes (docs/SECURITY.md)
//
// IDs used as subject tokens match ^[A-Za-z0-9_-]{1,128}$ (rollout.ValidateID).
// Setup creates what is missing and never changes what exists: a stream or
// bucket whose subjects, retention, storage, replicas or limits (max age,
// bytes, msgs, msgs per subject, message size, the lease TTL) differ is an
// ErrConfigMismatch naming it and the field.
//
// # Packs
//
// A ROLLOUTS message is a pack: consecutive records of one rollout. The
// payload is their JSONL lines, each terminated by '\n', exactly as a rollout
// file holds them (ordinals and crcs included). Headers:
//
//	Nats-Msg-Id    <rollout_id>:<first>-<last>:<epoch>
//	Logbook-Pack   1 (the pack format; a reader refuses a newer one)
//	Logbook-First  ordinal of the first line
//	Logbook-Last   ordinal of the last line
//	Logbook-Epoch  the writer's lease epoch
//	Logbook-CRC    CRC-32C of the whole payload, 8 lowercase hex digits
//
// The lines are Last-First+1 records with ordinals First..Last; the packs of a
// rollout, in stream order, hold ordinals 1, 2, 3 ... without gaps. A pack
// holds at most max payload less an 8 KiB header reserve. Packs were chosen
// over JetStream atomic batches: a batch of k records costs k messages, a
// per-batch store on the server and at most 50 batches in flight per stream;
// measured 10-75x slower here (docs/BENCHMARKS.md, "Bus").
//
// # Leases
//
// Only the holder of a thread's lease writes its rollouts. LEASES holds
//
//	{"holder":"<name>","epoch":<epoch>,"taken":"<RFC 3339>","renewed":"<RFC 3339>"}
//
// Taking is a KV create; its revision is the writer's epoch, written as 0 in
// that first value ("the epoch is this revision") and explicitly in the
// renewals, which are compare-and-swap updates on the last revision every
// TTL/3 and keep the epoch. A lease is lost when a renewal finds another
// revision or no key (taken over, or expired on the server), or when no
// renewal succeeded for a whole TTL; then Lease.Done is closed and every
// writer on it stops. Taking a live lease of another holder fails with a
// *LeaseHeldError (holder, epoch, expiry = the server's time of the last
// renewal + TTL, compared with the local clock); a lease past its expiry is
// taken over; Force takes it over anyway. A takeover is an update on the
// current revision, so the new epoch is higher and the old holder's next
// renewal fails. Release deletes the key if it is still ours.
//
// # Writing
//
// A Writer serves one rollout. On open it finds the rollout's valid tail
// (Bus.ValidTail), never simply the last message on the subject: it reads
// the subject's packs in stream order from the stream leader (next message
// by subject, no consumer) and keeps the last one that passes the pack and
// record checks and follows the tail so far by the valid-tail rule,
// Tail.Follows, written once and applied by the mirror too: ordinals
// continuous from 1, epochs never decreasing. Anything else published on
// the subject (a stale or forged pack) is skipped, so it cannot make a
// resumed writer reuse ordinals already acknowledged. The writer's next
// publish expects the subject's real last sequence, valid or not. A valid
// tail written by a higher epoch fences it at once. Ordinals continue from
// the tail; a
// record that carries an ordinal must carry exactly the next one
// (ErrWrongOrdinal).
//
// Append validates and enqueues; it never waits for I/O, only for room: the
// queue holds at most QueueRecords records or QueueBytes bytes not yet
// acknowledged, and Append waits for room until its context ends
// (back-pressure) while TryAppend fails with ErrQueueFull. Before a record
// consumes an ordinal: transient events (rollout.Persist) are dropped, and
// these are refused with nothing written: a line over the record limit
// (ErrTooLarge; default max payload less the header reserve), a line that
// does not decode as a record or holds a raw newline, a crc that does not
// match, an invalid ID in a session_meta (Validate) or in the IDs of
// inter_agent_sent/received, thread_spawned, rollout_sealed and reconciled,
// and an ordinal-1 session_meta naming another thread or rollout
// (ErrInvalidRecord).
//
// A new rollout is deferred: nothing is published until its first
// meaningful record (a user_message, task_started or inter_agent_received
// event, any response_item) or Materialize. A writer closed before that
// publishes nothing: a thread with no meaningful input is not materialized.
//
// One goroutine per writer publishes, one pack at a time (so at most one
// publish per rollout is in flight), and everything enqueued while a publish
// was in flight goes into the next pack (group commit). Every publish carries
// Nats-Expected-Last-Subject-Sequence = the subject's last stream sequence
// known to the writer. A pack's boundaries and bytes are fixed when it is
// first sent: retries resend the same bytes under the same msg id.
//
// # Fencing and retries
//
// The epoch is in the msg id because on a replicated stream the server checks
// the dedupe window before the expected sequence: without it a resumer's pack
// for ordinal 11 would be "deduplicated" against a zombie's pack for 11 and
// acknowledged with the zombie's bytes (NATS-NOTES, checked in dedupeTrap).
// An ack that is not a duplicate is success. Anything else — a Duplicate ack,
// 10071 or 10164 (wrong last sequence), 10158, 10163 (leader change), a
// timeout, a lost connection — is resolved by reading, from the stream
// leader, the subject's first message after the expected sequence:
//
//	our msg id and our exact bytes   landed: advance to its sequence
//	anything else                    fenced: *FencedError, the writer stops
//	nothing                          not stored: retry
//	the read fails                   unknown: retry
//
// Retries back off exponentially from BackoffMin to BackoffMax. A message
// the server can never take (over its size limit) stops the writer. Failures
// never drop records: after FailAfter failed attempts in a row, Flush and Err
// report a *PublishError (ErrPublishFailing) while the writer keeps the
// unwritten suffix and keeps retrying; a later Flush succeeds once a retry
// gets through. A writer that stopped (fenced, lease lost, closed) returns
// its error from every call and keeps the suffix (Unacknowledged).
//
// # Timeouts and leader failover
//
// Every bus call is bounded. One attempt of a message get or a KV create,
// update, get or delete waits at most Options.CallTimeout (default
// DefaultCallTimeout, 5 s); a writer's publish attempt waits at most
// WriterOptions.PublishTimeout (default 5 s). A transient failure — no
// responders, a timed-out attempt, an API error with code 503 (no leader,
// no quorum yet), 10158, 10163 — is retried with backoff (50 ms doubling to
// 1 s) against whichever node now leads, until the caller's context ends;
// then it fails with ErrBusUnavailable wrapping the last failure. The
// caller's context (a command's --timeout) bounds the whole operation, never
// one attempt. A leader election therefore costs a few retries (a new leader
// answers within about a second on a LAN); a cluster without quorum fails
// each caller at its own deadline.
//
// Credentials (--creds, --nkey, --user/--password, --token, --tls-ca,
// --tls-cert, --tls-key, as the nats CLI takes them) become Dial's extra
// options through Credentials.Options, the one place they are built. Dial
// logs the server's asynchronous errors: a permission violation is only
// that (a denied request is not answered and times out).
//
// Dial connects clients with bounded reconnects: a dial waits at most
// ConnectTimeout (2 s); a lost connection is retried over every URL given
// ReconnectTries (10) times, ReconnectWait (250 ms) apart, then the
// connection is closed and every waiting call fails at once with
// nats.ErrConnectionClosed (within about 3 s of the server going away).
//
// Flush returns once every record appended before the call is acknowledged.
// EndTurn applies the chapter's two barriers: flush the turn's body, enqueue
// the terminal record, announce, flush again.
//
// # Reading
//
// ReadRollout finds the first message holding an ordinal by binary search on
// stream sequences (the leader's "next message of the subject at or after
// sequence s"), then reads the rollout's messages by the same get, one
// after another, up to the tail the leader reported at open. No consumer is
// created (the server allows 1,000 per stream), so reading any number of
// rollouts, even abandoning readers, leaves nothing on the server.
// The reader returns one record at a time
// with its ordinal, stream sequence and epoch, checks each pack (format,
// headers, payload crc, line count) and each record (decodes, ordinal, crc),
// and reports damage as a *PackError before going on. CheckRecordIDs
// applies the writer's ID rules to a record read from the bus (the mirror
// trusts no publisher). ValidPacks reads the same way and yields only the
// packs the valid-tail rule accepts (see Writing); verify compares the
// mirror with those.
//
// A reader that holds a copy of a rollout's head (a mirror file) reads only
// what the copy lacks: TailAt finds the message whose pack ends with the
// copy's last record (the subject's last message when the copy is current,
// else the same binary search), checked as ValidPacks checks a pack, and
// ValidPacksFrom continues the valid-tail rule from that tail, reading only
// the messages stored after it. OpenWriterAt opens a writer at a tail read
// that way (KnownTail) instead of reading the rollout again: it looks up
// the subject's last message, skips junk stored since, refuses with
// ErrTailMoved when a pack was accepted since, and is then an OpenWriter
// (sealed and fenced tails refused, every publish expecting the subject's
// last sequence). RolloutGets counts the messages a Bus fetched, so tests
// and benchmarks can show what a read cost.
//
// # Durability
//
// What an acknowledgement promises depends on the server's fsync setting
// (docs/DURABILITY.md):
//
//	fsync always    (embedded default; sync_interval: always) every message is
//	                fsynced before its ack: an acknowledged record survives a
//	                process crash and a power loss of the server machine.
//	fsync interval  (NATS default, every 2 min) the ack means written to the OS:
//	                it survives a process crash (SIGKILL) but a power loss or
//	                kernel crash can lose the acks of the last interval on a
//	                single replica; on R3 it is lost only if a quorum of
//	                machines loses power within the interval.
//
// Never AsyncPersistMode: it acks before writing.
package stream
