// Package tree owns the lineage of a set of rollouts: which rollouts make up
// each thread, what each thread's current view is, and how threads descend
// from one another.
//
// # Threads and views
//
// A thread is named by the id of its rollouts' canonical session_meta. Its
// rollouts form a revert chain: a rollout sealed by rollout_sealed is replaced
// by its successor, so the current rollout is derivable from the rollouts
// alone (the THREADS pointer on the bus is a cache of it). A rollout with a
// history_base is read as a view: its session_meta, the frozen prefix of the
// base's view up to the base's byte offset, then its own records (see
// rollout.Joined). Records in a base that belongs to the same thread (a
// revert) are the thread's own; records in another thread's base (a fork by
// reference) belong to that thread. A fork by copy carries fork_copy in its
// session_meta: its records 2 .. end-1 are copies, counted once, for their
// origin.
//
// # The tree
//
// Edges come from both sides: thread_spawned in a parent (so a child that
// never wrote a line is still in the tree), parent_thread_id or Codex's
// source.subagent.thread_spawn.parent_thread_id in a child, and
// forked_from_id for forks. A node sits under its spawn parent, else under the
// thread it was forked from. Each node has a status: active (its lease is
// held), needs_attention (an interrupted turn, calls whose outcome is unknown,
// deliveries to it not confirmed, or child results still unconfirmed), or
// idle, with the counts that explain it.
//
// Bad input is reported, never fatal: unreadable files, a thread id claimed
// by unrelated rollouts (duplicate_thread: the newest chain wins), a sealed
// rollout whose successor is missing, a parent named by nobody (orphans, shown
// as roots), parents naming each other (cycle: broken, reported).
//
// The tree is rebuilt after a restart from the mirror's rollout files (or any
// directory of rollouts, such as ~/.codex/sessions); rebuilt at quiescence it
// equals the tree before: same IDs, edges and rollout chains.
//
// # The full scan on every core
//
// LoadDir reads the files on every core (GOMAXPROCS), each once: its lines
// are decoded into a tape that gives the corpus its records and, for a
// rollout that is its own view (no history_base) and not sealed, is played
// back to replay it (the replay reads its log from the head three times).
// Threads replays the other current views on every core too. What the
// workers find is merged in path order (LoadDir) and thread id order
// (Threads), so the corpus, its problems and the tree are the same as one
// file and one thread at a time would make them (the golden test holds them
// to what the serial scan answered).
//
// # Two sources, one assembly
//
// Build is the full scan: it reads every rollout, replays every current
// view and judges the ledger (dedupe), then hands the facts of each thread
// (its chain, current rollout, counts and spawn records; an Input) to
// Assemble, which makes the nodes, parent links, statuses, roots, orphans
// and cycles. The index keeps the same facts as projections and hands them
// to the same Assemble (index.Lineage), so the rules are written once: the
// revert chain is Chain, called by both. Page lists a tree's nodes in tree
// order, by status, a page at a time, with a cursor.
//
// AssembleSubtree builds one thread's subtree as Assemble and Find would,
// from less: an outline of every thread (its id, parent, fork source and
// creation time, and the spawn records), which shapes the whole tree (a
// cycle, an orphan or a conflicting parent anywhere changes what a subtree
// holds and what is reported with it), then the full facts, deliveries and
// child results of the subtree's members only. Shaping walks each node's
// way up once: a walk stops at a node an earlier walk passed.
package tree
