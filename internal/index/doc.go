// Package index owns the SQLite projection of a data dir's mirror: threads,
// rollouts, turns, items, edges, messages, settings and checkpoints, with a
// watermark per rollout, and the lineage tree and the delivery ledger as
// projections of them (calls, problems, deliveries). It answers "how do I find and list it"; the mirror
// files answer "what really happened". The index may lag, never lead; it can
// be rebuilt, never the only truth (DESIGN §5, the chapter's 10.4.1).
//
// # The data dir
//
//	DIR/rollouts/<rollout_id>.jsonl      one mirror file per rollout (or .jsonl.zst,
//	                                     seekable zstd, read transparently); whole
//	                                     validated records, fsynced by the mirror
//	DIR/index.db (-wal, -shm)            this package's file (SQLite, WAL mode)
//	DIR/index.db.reindex                 a rebuild in progress (removed by the next one)
//
// quarantine/, nats/, nats.url and LOCK belong to the mirror and the daemon.
// The index is SQLite through modernc.org/sqlite (pure Go, no cgo).
//
// # Schema (SchemaVersion, in PRAGMA user_version)
//
//	rollouts     one row per rollout: identity from its canonical (first) session_meta,
//	             history_base and fork_copy, sealed_by (the last rollout_sealed's
//	             successor), title and first message, model and cwd in effect, the last
//	             turn's status, the newest checkpoint in effect (ordinal, byte offset),
//	             the first and last record's timestamps, its view's dangling calls and
//	             the interrupted turns of its current window, the watermark, and the
//	             projection's state between batches (open and current turn, ...)
//	threads      one row per thread, derived from its rollouts' rows: the revert chain
//	             and its current rollout (tree.Chain, with its problems); searched through
//	             threads_fts (FTS5, trigram tokenizer) over thread_id, title, first_message, cwd, model
//	turns        every turn (rollout_id, seq): turn_id, start ordinal and offset, user
//	             flag, outcome and reason, rolled_back (and the marker that cut it), status
//	items        every response_item (rollout_id, ordinal): type, role, call_id, name, a
//	             one-line excerpt, the turn it was made in, in_effect
//	edges        spawn (thread_spawned in a parent; parent_thread_id or Codex's
//	             source.subagent.thread_spawn.parent_thread_id in a child's canonical
//	             session_meta) and fork (forked_from_id) edges, one row per record, in_effect
//	messages     every inter_agent_sent / inter_agent_received ("sent", "received") and
//	             reconciled{msg_id} ("note", with outcome, evidence, by): msg_id,
//	             idempotency_key, from/to thread, kind, in_reply_to, turn, in_effect, the
//	             origin (the rollout and ordinal it was first written at), copied (a fork
//	             copy's record, counted for its origin)
//	settings     every turn_context (model, cwd, in_effect); checkpoints: every compaction
//	             with a replacement_history (ordinal, byte offset, in_effect)
//	calls        every call_id of the view: the last call's ordinal, open (no output and
//	             no reconciled record but unknown after it: a dangling call)
//	problems     records left out of the tree and the ledger, with why (invalid_id)
//	deliveries   one row per (msg_id, receiving thread): dedupe's judgement (state,
//	             reason, sends, receipts, receipts in effect) and the child result it
//	             makes, if any (task, result, parent, child, state, reason)
//
// Rows are physical: records a rollback took out of effect stay, with
// in_effect = 0 (the delivery ledger and the tree need them). The one
// exception is a rollout with a history_base (a fork by reference, a
// revert): its view's prefix is projected into its turns, messages,
// checkpoints and calls too, at ordinals below 0, so its turns, effect and
// calls are its view's (view.go). Columns are NOT NULL; "" and 0 mean
// absent.
//
// # Ordinals
//
// Rows are keyed by (rollout_id, ordinal). A version-0 (Codex) rollout has no
// ordinals: its ordinals in the index are 1-based line numbers in the mirror
// file (damaged lines keep their number), and its watermark is a line.
//
// # Watermarks
//
// Each rollout's watermark is the last ordinal indexed, the byte offset just
// past its line (in the uncompressed JSONL), the offset of that line and the
// CRC-32C of the whole line. Invariants:
//
//  1. A batch (Apply) commits in one transaction, and only if it follows the
//     watermark: its first record has the next ordinal at the watermark's
//     offset (version 0: a later line at or after it), its ordinals are
//     consecutive and its lines adjacent. Otherwise nothing is written and
//     Apply returns an *OrderError (ErrOutOfOrder), whose Behind method says
//     whether the batch repeats indexed records or leaves a hole.
//  2. The index never holds what the mirror lacks. Open on a data dir checks
//     every watermark against its mirror file: the line at the watermark's
//     offset must still be the last indexed line (same ordinal, same CRC).
//     A rollout whose file is gone is deleted from the index; one whose file
//     does not match is reset (its rows deleted) and indexed again by CatchUp.
//  3. Catch-up reads each mirror file from the watermark (a checked hint:
//     the same check, and a full re-index of that rollout when it fails).
//     A torn last line is left for later. Other damage in a rollout with
//     ordinals stops that rollout's catch-up before it (ErrMirrorDamaged):
//     the index lags there, and verify names the line. In a version-0
//     rollout damaged lines are skipped, as replay skips them.
//  4. Rebuilding (Rebuild) projects every mirror file into index.db.reindex
//     and renames it over index.db once complete, after checkpointing the old
//     file's WAL: a crash at any point leaves the old index usable.
//
// Rebuilt and incremental indexes hold the same rows (threads.seq, the FTS
// rowid, aside), whatever the batch boundaries.
//
// # The projection
//
// Turns follow replay's rules (DESIGN §4 rule 0, docs/FORMAT.md): a turn runs
// from a task_started (or, in a version-0 log before any task_started, a
// user_message) to the next; it is a user turn when a user_message or a task
// receipt arrives while it is open; a terminal event names its turn by id,
// else ends the current one, and the first one counts. A rollback marker is
// applied incrementally exactly as replay's effect pass applies it: the turns
// in effect are the turns not rolled back, so the marker cuts from the start
// of the Nth-newest user turn among them (the oldest in effect when there are
// fewer, nothing when there is none) through the marker; every row in that
// range goes out of effect. A turn's status is completed, aborted (with the
// reason), interrupted, or rolled_back, which wins. Model and cwd are the
// last turn_context in effect's (cwd: else the session_meta's), as replay's.
// The title is the first user_message event's text, else the first user
// message item that is not injected context (<environment_context>, ...).
//
// A thread's current rollout is the end of its revert chain (tree.Chain:
// rollouts followed along rollout_sealed successors, the newest chain end
// when there are unrelated ones); its identity and title come from its
// oldest rollout.
//
// # Lineage and ledger
//
// The tree and the delivery ledger are kept by the same catch-up that
// indexes records, in each batch's transaction, so `coordinator tree` and
// `unconfirmed` are queries (Lineage, Unconfirmed), not a replay of every
// mirror file; the full scan of the files (tree.Build) is the reference, and
// VerifyLineage (verify --data) and a property test over generated agent
// trees hold the index to it.
//
//   - Edges: spawn and fork edges as above; each thread's chain and current
//     rollout; a node's counts are its current rollout's: the interrupted
//     turns of its view's current window and its view's dangling calls, by
//     replay's rules (DESIGN §4 rules 4, 5).
//   - Effect: a receipt is in effect when its thread's current rollout
//     holds it in effect, as its own row or as a row of its view's prefix
//     (a revert keeps the receipts before its base); a rollback is the
//     projection's own cut, applied over the view; nothing is in effect in
//     a view that could not be read (bad_base). A fork copy's records count
//     once, for where they were first written.
//   - Deliveries: an apply that adds a send, a receipt or a note, or
//     changes a receipt's effect (a cut, a new current rollout), judges
//     again the deliveries of those msg ids (and of those sharing an
//     idempotency key with them at the same receiver) with dedupe, over
//     their rows: dedupe's rule, not a copy of it.
//
// Subtree answers `tree THREAD`: it reads every thread's outline (id,
// parent, fork source, creation time; one row each, no packed node
// decoded) and the spawn records the tree can learn from, and the full
// node, deliveries and child results of the subtree's members alone, and
// hands them to tree.AssembleSubtree; the property test asks it for random
// subtrees and prefixes and requires what the full scan's tree gives.
//
// What the full scan reports and the index does not: a mirror file that is
// not a rollout at all beyond "no session_meta", a session_meta that fails
// validation (the index does not index such a rollout), and a fork copy
// whose source rollout is missing (its copied records are not counted).
//
// # Readers
//
// Reader opens index.db read-only: it never takes the data dir LOCK and
// reads consistent snapshots while a coordinator writes (WAL). Threads pages
// newest first by the key (created_at, thread_id), which never changes for a
// thread, with an opaque cursor tied to its search: threads indexed while a
// client pages never make a page skip or repeat one. Search (SearchAuto) first
// scans up to 10,000 threads in page order with LIKE, which fills a page at
// once for any word that is not rare, and otherwise asks the trigram index,
// which is fast exactly for rare words (docs/BENCHMARKS.md, "Index", has the
// measurements behind that choice; words under three characters always use
// LIKE). Show replays
// a thread's current rollout with replay.Fast and checks the index's
// checkpoint locator and turns against what replay found (Shown.Stale).
// VerifyIndex compares the index with a fresh projection of the mirror up to
// the same watermarks.
package index
