// Package datadir owns the layout of a coordinator's data dir: every name
// in it, and the few functions that find files by those names. Nothing
// else in the module spells a data dir path; the mirror, the index, serve
// and the CLI all ask here, so the mirror does not depend on the index (or
// the other way round) only to agree on where files live.
//
// A data dir (default ~/.logbook) holds:
//
//	LOCK                  flock held by the serving coordinator (its pid, host, start)
//	nats.url              the embedded NATS client URL while it serves; removed on a clean stop
//	http.url              the HTTP URL it serves /healthz and /status on (the bound address); removed on a clean stop
//	nats/                 the embedded server's JetStream store
//	rollouts/             the mirror: <rollout_id>.jsonl, or .jsonl.zst once cold
//	mirror.state          the mirror's watermark (two crc-checked slots)
//	mirror.epochs         the mirror's epoch journal: each rollout's highest accepted epoch
//	quarantine/           what the mirror refused, one JSONL file per kind
//	quarantine/damaged/   mirror files set aside as damaged, each with a .reason
//	index.db              the SQLite index (a projection: rebuilt from rollouts/)
//
// A rollout id is a valid rollout.ValidateID id, so it is always a single
// path element. Other names under rollouts/ (temporary files of a
// compression in progress, start with ".") are not mirror files.
//
// The package is a leaf: it imports only internal/rollout (for the id rule
// and the compressed extension).
package datadir
