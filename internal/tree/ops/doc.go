// Package ops changes lineage on the bus: fork, rollback, revert, the
// start-up roll-forward of reverts, garbage collection of unreferenced old
// rollouts, and import of rollout files. It reads sources from the bus (the
// authority; the mirror may lag) and writes through internal/stream.
//
// None of these operations touches the outside world. Rolling a conversation
// back, reverting it or forking it changes which history a thread's next
// session sees; files, deployments, sent requests and every other outside
// effect are NOT undone, and every operation's report says so.
//
// # Fork
//
// A fork creates a new thread from a frozen position of another: a turn
// boundary of a turn in effect (before a turn, after a turn, or the latest
// durable state). By copy, the child's rollout holds its own session_meta
// (forked_from_id, fork_copy) and then the prefix of the source's view,
// payload bytes unchanged, under its own ordinals. By reference, the child
// holds its session_meta with history_base naming the rollout and position
// the prefix ends at (the base rollout the position falls in, when the
// source's view is itself joined), and reading it joins that frozen prefix
// with its own suffix. A position inside an active turn (started, no
// terminal event) gives the child a synthesized turn_aborted{interrupted}.
//
// # Rollback and revert
//
// Rollback (legacy threads, idle only: its lease must be free) appends
// thread_rolled_back{N} to the current rollout under the thread's lease and
// replays. A paginated thread refuses it and points to revert.
//
// Revert (paginated threads) writes a new rollout of the same thread whose
// history_base ends before the target turn, then appends
// rollout_sealed{successor} to the old rollout fenced by the tail it read
// (a concurrent append makes the seal fail and the revert abort; a seal that
// lands makes the concurrent writer's next publish fail), and only then
// switches THREADS by compare-and-swap. A sealed rollout whose pointer was
// not switched (a crash in between) is rolled forward when `coordinator
// serve` starts (RollForward).
//
// # Garbage collection
//
// GC removes sealed rollouts and abandoned revert attempts that no
// history_base or fork_copy names and that are not on the seal chain of a
// rollout that stays (a reader walks successors from the first rollout of a
// thread). Facts come from the bus and the mirror's files through
// rollout.Scan; a damaged message on the bus is skipped and counted, and a
// rollout gc cannot read is kept. A mirror file that cannot be read stops gc
// with an error naming it, before anything is removed.
//
// # Reading a thread for a resume
//
// Load reads every rollout of a thread's view from the bus. LoadView reads
// the same view at a cost that grows with what the data dir's mirror lacks,
// not with the rollout: the current rollout's mirror file up to its last
// whole record, then only the bus messages past the one the file ends with
// (stream.Bus.TailAt, stream.Bus.ValidPacksFrom: the valid-tail rule
// continued from that pack); a base from its mirror file when the file
// holds the frozen prefix exactly. A rollout whose file is absent, empty,
// damaged at its tail or not the bus's is read from the bus from its start
// by the valid-tail rule, and ReadStats.Fallback says why. The view's Known
// tail is what a writer opens at (stream.Bus.OpenWriterAt) without reading
// the rollout again, and Extend folds in what was accepted since (a
// resume's own appends). ReadStats counts what came from where.
package ops
