// Package stream will own the bus: the JetStream rollout writer (bounded
// queue, group commit, the chapter's two barriers, lease-epoch fencing), the
// mirror that copies ROLLOUTS to local JSONL, and the zstd cold files
// (DESIGN §5). Not built yet: see the bus issues.
package stream
