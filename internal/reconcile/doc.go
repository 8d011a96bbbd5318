// Package reconcile owns what a resume decides: replay records, never side
// effects.
//
// After a crash a thread's log can say three things it cannot prove: a turn
// started and never ended, a call was made and its result never logged, a
// message was logged as sent and may never have been published. Resume does
// not guess. It
//
//   - turns a stale in-progress turn into turn_aborted{stale_after_crash},
//     and only once the thread's lease has expired (the old writer is gone);
//   - lists every dangling call as unknown — not failed, not pending: its
//     effect may have happened;
//   - asks a Prober about the calls that carry an idempotency key, and about
//     each logged send that has no receipt, after searching the MAIL stream
//     for its msg_id (still there: published, awaiting the receiver; not
//     there and never received: never published);
//   - records every answer as reconciled{call_id|msg_id, outcome, evidence,
//     by}. An answer of unknown is recorded too, for the audit trail, and
//     leaves the call dangling.
//
// A resume reads the thread once (ops.LoadView): with ResumeOptions.DataDir,
// from the mirror files as far as they go and from the bus only past them;
// a mirror copy found damaged inside what the fast replay reads is dropped
// and the thread read from the bus. Its writer opens at the tail that read
// found (stream.Bus.OpenWriterAt), and the state after is that view with
// the appended records read back, so the cost of a resume with a current
// mirror does not grow with the rollout (ResumeReport.Read counts it;
// BenchmarkResume). A record accepted on the rollout between the read and
// the writer's open stops the resume with nothing appended.
//
// Records say only what happened. A prober that could ask nobody (no
// terminal, no prober, input that ended) returns ErrNotAsked: no answer, no
// record, and the call stays unknown for a person to reconcile. An answer the
// log already holds (the latest reconciled record for that call or message
// has the same outcome, evidence and by) is not appended again, so a resume
// that learns nothing new appends nothing (Fresh).
//
// Note records what a person found out, and only about what is open in the
// thread: a dangling call, or a delivery from or to it that is not
// confirmed. Any other id is refused, naming the open ones.
//
// It never re-executes a call or re-sends a message on its own. With
// RetryProvenNotExecuted it re-sends only the messages a probe proved were
// never published, under their original msg_id; a call proven not executed is
// recorded as such, so the agent may run it again — the coordinator runs no
// tools.
//
// Probers: Scripted (tests), Terminal (asks a person; answers unknown at once
// when stdin is not a terminal), and the simulator's external world, which
// keeps a ledger per idempotency key.
package reconcile
