// Package tree will own the lineage tree: spawn and fork edges, each thread's
// current rollout and its revert chain, orphans, duplicate IDs and cycles
// reported, never fatal (DESIGN §6). Not built yet.
package tree
