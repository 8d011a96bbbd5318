// Package treegen writes the rollout files of a whole tree of agent threads,
// of any size, deterministically from a seed: the input of the scale
// benchmark (`make bench BENCH=scale`) and of tests that need a big,
// well-formed tree.
//
// # Shape
//
// The root has Fanout children, each of them Fanout children, down to
// Depth levels below the root: 1 + Fanout + ... + Fanout^Depth threads
// (fanout 10, depth 4: 11,111). Every thread runs Turns turns; a turn is
// task_started, turn_context, a user_message event and its user message
// item, a function call and its output, an assistant message, a token count
// and task_complete (nine records).
//
// Every edge carries a task down and a result up, as the agent runtime
// writes them: the parent's second-to-last turn (its only one, when Turns
// is 1) logs, for each child, thread_spawned and inter_agent_sent{task};
// the child's session_meta names its parent and its role, its first turn
// logs inter_agent_received{task}, its last turn inter_agent_sent{result,
// in_reply_to the task}; the parent's last turn starts with
// inter_agent_received{result} for each child. A fraction Unreceived of the
// results (chosen per edge from the seed) is never received: those
// deliveries are unconfirmed and their tasks' results still unconfirmed at
// the parent, so `unconfirmed` has something to say.
//
// With fanout 10, depth 4 and 8 turns that is 866,533 records (78 a
// thread), about 190 bytes a record.
//
// # Files
//
// Rollouts are written version-1 (ordinals and crcs; one rollout per thread,
// named like it), in the layout of a Codex sessions directory that
// `coordinator import` and `--rollouts` read:
// DIR/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<thread id>.jsonl, dated by
// the thread's first record. Thread ids look like UUIDs; ID gives the id of
// the thread at a path of child indexes (ID(cfg) the root, ID(cfg, 0) its
// first child, whose subtree holds 1 + Fanout + ... + Fanout^(Depth-1)
// threads).
//
// # Determinism
//
// Each thread's records come from its own random source, seeded by the
// seed and its path, and its clock from its parent's (a child starts just
// after its spawn; a parent's last turn starts after its last child's
// result), so the same Config writes the same bytes whatever the order or
// the parallelism of the writing (Write uses every core).
package treegen
