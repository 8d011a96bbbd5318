// Package dedupe owns cross-thread delivery: message IDs, idempotency keys,
// and the classification of every delivery from the rollouts alone.
//
// # Protocol
//
// Each cross-thread message has a ULID msg_id and a business idempotency_key.
// The sender logs and flushes inter_agent_sent before it publishes to
// mail.<to_thread> with Nats-Msg-Id = msg_id; a re-send after a crash reuses
// the msg_id. The receiver logs and flushes inter_agent_received before it
// acknowledges the mail message. Neither step is atomic with the other
// thread's log, so the bus is never the judge of "delivered once": the
// rollouts are.
//
// # Classification
//
// A Ledger holds the physical send and receipt records of all rollouts (each
// record counted once, for its origin: a record a fork copied into a child's
// rollout is the parent's record, not a second one) with, for receipts,
// whether they are in effect in the receiving thread's current view. Each
// delivery, keyed by (msg_id, receiving thread), is then exactly one of:
//
//	orphan_receipt       received, but no sender's log has such a send
//	unconfirmed          sent, no receipt at all (in flight, never published,
//	                     lost, or the receiver crashed first)
//	possibly_duplicated  received more than once, or its idempotency key was
//	                     also received under another msg_id by the same thread
//	rolled_back_receipt  received once, and that receipt is out of effect
//	                     (rolled back or reverted away)
//	confirmed            sent, and received exactly once, in effect
//
// Sends count whether or not they are in effect: a rolled-back send still
// happened. Receipts count physically for duplicates (a receipt that was
// rolled back was still acted on) and in effect for confirmation (the
// receiver's model must still know the message).
//
// A delivery is named (its key, sender, kind, reason) by its first send
// written (by rollout id, then ordinal), so a re-send gives the same text
// every time; lists come out sorted, never in map order.
//
// ChildResults answers the question operators ask most: which child results
// are still unconfirmed — tasks whose child never sent a result, and results
// not confirmed at the parent.
package dedupe
