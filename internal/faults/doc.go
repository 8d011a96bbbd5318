// Package faults holds named crash points: places in the code where a crash
// test can make the process die at the worst moment, with SIGKILL, exactly
// as a power cut or an OOM kill would stop it (no deferred calls, no
// flushing, nothing).
//
// It is a top-level package because its points are shared by several
// owners: the mirror (internal/stream/mirror), the index (internal/index),
// the delivery protocol (internal/dedupe) and the crash tester of the
// simulator (cmd/agent-sim), which arms them in the processes it starts.
// None of them may import the others.
//
// # Arming
//
// A point is armed by the environment variable LOGBOOK_CRASH, read once, on
// the first call into this package:
//
//	LOGBOOK_CRASH=name[:n][,name[:n]...]
//
// The process SIGKILLs itself the nth time (default 1) that the named point
// is reached. Before dying it writes one line to stderr,
//
//	faults: crash point <name> reached (<n>): SIGKILL
//
// so a test can tell a planned death from a real one. An unarmed point costs
// one atomic load. Names in use (keep this list current):
//
//	mirror.after-ack          a message is received from JetStream (it was acknowledged
//	                          to its writer), before the mirror writes any of it
//	mirror.mid-append         half of a message's lines are written to the mirror file
//	                          (only while armed: the write is split in two to make a torn tail)
//	mirror.before-watermark   the batch's mirror files are fsynced, the watermark not yet
//	mirror.zst-before-rename  a verified .jsonl.zst temp file is fsynced, not yet renamed
//	mirror.zst-after-rename   the .jsonl.zst is in place, the .jsonl not yet removed
//	mirror.unzst-after-rename a re-materialized .jsonl is in place, the .jsonl.zst not yet removed
//	index.mid-tx              inside an index batch's SQLite transaction, before the commit
//	revert.after-seal         a revert sealed the old rollout, THREADS not yet switched
//	lease.mid-renew           a lease renewal's update was answered by the bus, its holder
//	                          has not taken the answer in (its renewal landed, or failed)
//	mail.after-sent-flush     a sender's inter_agent_sent is flushed, the mail not yet published
//	mail.before-receipt       a receiver took a mail message, its inter_agent_received not yet logged
//
// Tests in one process can use Arm instead of the environment; its action
// need not kill (it may panic or record the hit).
package faults
