// Package dedupe will own cross-thread delivery: message IDs, idempotency keys,
// and the classification of every delivery as confirmed, unconfirmed,
// possibly_duplicated, orphan_receipt or rolled_back_receipt (DESIGN §7).
// Not built yet.
package dedupe
