// Package simcrash is the simulator's exhaustive crash mode (DESIGN §8,
// `agent-sim enumerate`, to become `agent-sim crash --enumerate`): every
// named crash point, at every position it is reached, in small scripted
// agent trees, for several seeds, with the invariants checked after each
// scenario. It runs in one process, so it is fast.
//
// # What runs
//
// An Env is an embedded nats-server with JetStream set up as `coordinator
// serve` sets it up, with the coordinator's mirror and index running on a
// data dir as serve runs them. Scenarios share it (each has ids of its
// own) except those that crash the mirror, which get an Env of their own
// (RunOwn; about 20 ms to start), so that the mirror's nth append is the
// same record in every run.
//
// An agent process is an agent.Client (the public package only: the
// scripted agents in program.go use nothing else) connected through a
// Proxy: a TCP proxy that parses the NATS client protocol both ways. A
// crash of the process is a cut: both directions stop at once, nothing
// the process had not yet handed to the proxy reaches the server, and the
// proxy's listener closes, so the client cannot reconnect — SIGKILL, as
// seen from the bus. The dead process's goroutines are abandoned, never
// waited for; its effects on the world are refused from the instant of
// death. The proxy also records every publish the process made and every
// JetStream acknowledgement it forwarded: the ground truth of what the
// process was told is stored.
//
// Recovery is what time does after a SIGKILL, without the waiting: the
// dead process's leases are deleted (their TTL passing) and its mailbox
// consumers deleted (their inactivity threshold passing, so a message it
// had taken and not acknowledged is delivered again), then a new process
// opens every thread of the tree (agent.Client.Open: the lease, the
// resume, the world's probe about calls left without an output, re-sends
// of mail proven never published) and the script goes on from what each
// thread's log says.
//
// # Trees
//
// tree (a driver D, its root r with children a and b, a's child g), fork
// (the operator forks r after one of its turns, by copy or by reference,
// and D gives the fork a task of its own), revert (a paginated thread
// reverted before its third turn by the operator, then asked to redo from
// there; the third turn's effects stay done), resend (a task sent again
// under the same idempotency key). A seed decides the turns of each
// thread, the calls of each turn, the order a process visits its threads,
// the fork's turn and mode (NewPlan). D is a thread too: it spawns the
// root, waits for answers, and does the operator's fork and revert
// through the process's own connection, so a crash of the process is a
// crash of the operator.
//
// # Points and positions
//
// Agent side (Points): before_effect, after_effect (in the effect),
// between_barriers (in Turn.End's announce), after_spawn (after
// Thread.Spawn), and at the wire, the publish the process dies just
// before: sent_before_publish (the mail, after its inter_agent_sent was
// flushed), taken_before_receipt (the inter_agent_received pack, after
// the mail was fetched), receipt_before_ack (the mail's ack, after the
// receipt was flushed), spawned_before_child (a child's session_meta,
// after thread_spawned), created_before_recorded (a THREADS create, after
// the session_meta), revert_after_seal (the revert's THREADS switch,
// after the seal: faults' revert.after-seal). Coordinator side:
// mirror_after_ack (the mirror dies before appending a message it
// received) and mirror_torn_write (half way through the append), through
// the mirror's FS seam: from the death on nothing reaches the disk; the
// mirror is then restarted as serve restarts it, while the agents go on.
//
// A clean run of a tree and seed counts how often the process reaches
// each point; a scenario is tree x seed x point x position (the nth time
// the point is reached), run to the end with one crash and checked. A
// position the run does not reach (a pack boundary that moved) is not
// counted as a scenario. Scenario ids (tree/seed/point/position) run
// again with RunOne.
//
// # Invariants
//
// check.go: every planned effect carried out exactly once and nothing
// else (the world counts every request as an execution); the call in
// flight at the crash reported by a resume and reconciled as the world
// knows it, no call left unknown, none logged as failed; one send per
// message, each delivery confirmed except what the plan or the crash
// makes possibly_duplicated; the tree from the bus and from the mirror
// equal to the plan's (threads, parents, forks, revert chains; no
// problems, nothing unknown or unconfirmed beyond what the ledger's rules
// say), with THREADS naming each thread's current rollout (or, after a
// revert cut before its switch, one of its chain); fast replay equal to the naive fold for every thread; every
// acknowledged pack on the bus's valid tail and in the mirror byte for
// byte; index <= mirror <= bus, and equal once caught up.
package simcrash
