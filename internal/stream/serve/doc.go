// Package serve runs `coordinator serve`: the process that owns a data dir
// and the bus. In this version it:
//
//   - refuses, before anything starts, a --nats-listen beyond loopback
//     without --auth and a --listen beyond loopback without --http-token,
//     naming the flag (auth.go; docs/SECURITY.md);
//   - takes an exclusive flock on <data>/LOCK (pid, host and start time
//     inside) so that one coordinator serves a data dir; a second one fails
//     with one line naming the holder. The kernel drops the lock when the
//     process dies, SIGKILL included;
//   - starts the embedded nats-server with JetStream (store <data>/nats,
//     client address --nats-listen, fsync per --fsync; with --auth only the
//     users file's users, each with its role's permissions, plus two
//     identities made at each start: its own in-process connection, role
//     coordinator, and a local operator whose seed it writes to
//     <data>/nats.nk, 0600, removed on a clean stop; TLS with --tls-cert and
//     --tls-key, mutual with --tls-ca), or connects to --nats URL with the
//     given credentials and TLS and embeds nothing;
//   - runs stream.Setup (idempotent; a mismatching configuration is an error)
//     and opens the bus, which fixes the record size limit;
//   - rolls forward half-done reverts (ops.RollForward: a THREADS pointer
//     naming a sealed rollout is switched to its successor) before the mirror
//     starts; a thread that cannot be moved is logged and left as it is;
//   - answers logbook.api.threads.record (stream.Bus.ServeThreadRecords):
//     agents' new threads are recorded in THREADS here, create-only;
//   - prepares the mirror (internal/stream/mirror: removes what a crash left
//     half done), opens the index (internal/index: its watermarks capped at
//     the mirror files), catches the index up with the mirror files, then
//     starts mirroring ROLLOUTS from the mirror's watermark; the index
//     follows each durable batch. An index.db that is not a usable index
//     (garbage, another schema) is kept aside as index.db.broken-<time> and
//     rebuilt from the mirror files; one that still cannot be opened is
//     logged and left out, and the mirror runs without it;
//   - writes the client URL to <data>/nats.url (temp file, fsync, rename) and
//     prints it, with the HTTP address, on stdout;
//   - serves GET /healthz on --listen (503 while the bus connection is down;
//     else 200 with status "ok", or "degraded" and the reason: the mirror's
//     last failure, a set-aside rollout not yet rebuilt, the index unavailable)
//     and GET /status, both behind the --http-token bearer token when given
//     (the mirror's counters: watermark, records,
//     quarantined messages by kind, ...);
//   - on ctx's end (SIGINT/SIGTERM in the command) stops in order: HTTP
//     server, mirror and index, connection drain, embedded server shutdown
//     and wait, lock. A mirror that cannot go on safely (its watermark ahead
//     of the bus) stops the coordinator with an error.
//
// The HTTP API, the web page and /metrics join this process in later
// issues. The bus protocol itself is package stream.
package serve
