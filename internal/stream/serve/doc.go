// Package serve runs `coordinator serve`: the process that owns a data dir
// and the bus. In this version it:
//
//   - takes an exclusive flock on <data>/LOCK (pid, host and start time
//     inside) so that one coordinator serves a data dir; a second one fails
//     with one line naming the holder. The kernel drops the lock when the
//     process dies, SIGKILL included;
//   - starts the embedded nats-server with JetStream (store <data>/nats,
//     client address --nats-listen, fsync per --fsync), or connects to
//     --nats URL and embeds nothing;
//   - runs stream.Setup (idempotent; a mismatching configuration is an error)
//     and opens the bus, which fixes the record size limit;
//   - writes the client URL to <data>/nats.url (temp file, fsync, rename) and
//     prints it, with the HTTP address, on stdout;
//   - serves GET /healthz on --listen (200 while the bus connection is up);
//   - on ctx's end (SIGINT/SIGTERM in the command) stops in order: HTTP
//     server, connection drain, embedded server shutdown and wait, lock.
//
// The mirror, the index, the HTTP API, the web page and /metrics join this
// process in later issues. The bus protocol itself is package stream.
package serve
