// Package index will own the SQLite projection of the mirror: threads, turns,
// items, edges, messages and per-rollout watermarks. It lags and never leads,
// and can always be rebuilt from the mirror (DESIGN §5). Not built yet.
package index
