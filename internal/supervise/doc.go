// Package supervise is the coordinator's worker supervision: it finds
// runnable threads and offers each to the workers, so that every thread
// with work waiting is run by exactly one live worker.
//
// Workers (agent processes on any machine, agent.Client.RunWorker)
// heartbeat into the WORKERS bucket (key = worker id, TTL = the lease TTL;
// the value lists the threads the worker holds) and pull offers from the
// WORK stream through one shared durable consumer, so each offer reaches
// one worker. WORK is a work queue holding at most one offer per thread
// (MaxMsgsPerSubject 1, DiscardNewPerSubject): the server itself refuses a
// second offer while one waits.
//
// A thread is runnable when
//   - mail waits in its mailbox (a task from its parent, a result from a
//     child) and no live lease holds it, or
//   - the worker that held it stopped heartbeating without a clean stop
//     (it died, perhaps mid-turn): the thread is offered once its lease has
//     expired, whether or not mail waits, so a resume aborts the stale turn
//     and asks about the dangling calls. A worker restarted under the same
//     id (another pid, host or start time in its heartbeat) counts as the
//     death of the old process: the threads the old one held are offered,
//     though the id never stopped heartbeating.
//
// Every Interval the supervisor reads which mailboxes hold mail (one
// stream-info call over MAIL's subjects), the lease of each such thread,
// and the live heartbeats, and offers what is runnable. The lease is what
// makes "at most one worker holds a thread" true: an offer is only a hint,
// a worker that takes one opens the thread by taking its lease, and a
// thread already held is refused to it (it drops the offer).
//
// An orphan (a thread of a dead worker) stays the supervisor's until a
// sweep sees it held by a live worker: an offer of it can be lost (taken
// by a worker that died before taking the lease, or dropped by one that
// found the dead holder's lease still live), so one not held two lease
// TTLs after its offer is offered again, up to three times.
//
// Why a work queue and not KV assignments or request/reply: the offer
// survives a coordinator crash (it is in the stream), a worker that dies
// after taking an offer and before acknowledging it loses it to another
// worker after the consumer's ack wait, workers need no address, and the
// server, not the supervisor, deduplicates offers. What is kept only in
// memory: which worker held which threads (from the heartbeats). After a
// coordinator restart, a worker that died while the coordinator was down is
// noticed only through the mail its threads get; its stale turns are
// aborted when they are next opened.
package supervise
