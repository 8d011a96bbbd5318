// Package replay rebuilds a thread's state from its rollout: a pure reducer,
// state' = apply(state, record), over a rollout.Log, with the projections
// kept side by side — model history, world state, turn lifecycle, settings
// (the last in-effect turn_context), token usage, window, identity and the
// dangling calls. It never touches the outside world: replaying re-reads
// facts, it never re-runs a side effect.
//
// # Two paths, one answer
//
// Naive is the reference: a first forward pass decides which records every
// rollback marker takes out of effect, a second folds every record. Walk and
// Timeline are Naive with a visitor (each record with whether it is in
// effect) and with every turn's span; the index and the tree use them.
//
// Fast is what a resume uses (rule 7): it reads the head of the log for the
// identity, then scans backward from the tail until it holds the dependency
// region, and folds that region forward. It promises exactly Naive's State
// (every field but Replay, the statistics of the read), at a cost that grows
// with the tail, not the history: State.Replay.RecordsRead is the proof, and
// TestFastPathIsFlat shows it flat from 10k to 1M records. A property test over
// generated logs (package gen) compares the two and requires non-zero
// coverage of the hard cases. The mutation hook (fast.go) breaks the backward
// scan on purpose; a test runs the property test against the broken path and
// requires it to fail, so the property test is known to be able to fail.
//
// # The rules, as implemented
//
//  0. Turns. A turn runs from its task_started to the next one; records after
//     a terminal event and before the next task_started belong to the
//     preceding turn; records before the first task_started belong to no turn
//     and are never rolled back. A user turn holds a user_message or a task
//     inter_agent_received before the next boundary (turn start or rollback
//     marker); only user turns are counted by a rollback. In a version-0 log a
//     user_message opens a turn (v0-<line>) until the first task_started; a
//     response_item with role user never does. A turn without a turn_id is
//     o<ordinal>.
//  1. Rollback, thread_rolled_back{num_turns: N}: the in-effect sequence is
//     cut at the start of the Nth-newest in-effect user turn before the
//     marker; everything from there to the marker, the marker included, is
//     out of effect. With fewer user turns in effect the cut is at the oldest
//     in-effect turn; with none, nothing is cut. Markers apply in order, so
//     consecutive ones add up. N is read by rollout.RollbackTurns: beyond
//     int64 it is more than any thread has; missing, zero, negative or not an
//     integer cuts nothing, with a bad_payload warning. Records out of effect
//     stay in the log, and facts about the world are not undone.
//  2. Compaction replaces the history with replacement_history and opens a
//     window (window_number, else the previous + 1); the world-state baseline
//     is empty until the next full. A compaction without replacement_history
//     is rebuilt as Codex does (IsContextual says which user messages are
//     injected context and left out), with a legacy_compaction warning.
//  3. World state: full sets the baseline, a patch merges into it (JSON merge
//     patch); a patch with no baseline in effect is skipped with a
//     missing_baseline warning, never guessed.
//  4. Turn status: completed, aborted (with its reason), rolled_back (its
//     start is out of effect; this wins) or interrupted (no terminal event).
//     A terminal event names its turn by turn_id, else ends the current one;
//     the first terminal event of a turn counts.
//  5. Dangling calls: a call with no output and no reconciled record (other
//     than one recording unknown) after it in the physical log, even when the
//     call was rolled back or compacted away, with its idempotency key and
//     the turn it was physically made in.
//  6. Token usage is the latest in-effect token_count.info; tokens spent is
//     the latest total_token_usage in the physical log, never rolled back.
//  7. Fast path: the dependency region runs from the turn that holds the
//     newest in-effect checkpoint (a compaction with replacement_history) to
//     the tail, extended back to the newest in-effect turn_context,
//     token_count and window base it needs.
//  8. Damage: a corrupt line, a CRC mismatch or an ordinal gap is skipped and
//     reported (line and byte offset); a torn last line is ignored. Damage
//     inside the dependency region fails Fast with ErrCorruptRegion unless
//     Options.Salvage, which falls back to the naive fold and says so; damage
//     before the canonical session_meta fails with ErrDamagedIdentity.
//  9. Model change: Options.Model other than the last in-effect model gives a
//     model_changed warning.
//
// State.Turns and State.Warnings cover the current window (from the turn that
// holds the newest in-effect checkpoint to the tail), which is what lets Fast
// equal Naive at a flat cost; the index lists every turn. docs/FORMAT.md is
// the same specification for users.
package replay
