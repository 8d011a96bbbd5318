// Package reconcile will own resume decisions: stale turns, dangling calls,
// probes of the outside world and unconfirmed results; it never re-executes a
// side effect on its own (DESIGN §7). Not built yet.
package reconcile
