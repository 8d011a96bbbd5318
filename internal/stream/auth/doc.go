// Package auth is who may use the bus and what each may do (DESIGN §9,
// docs/SECURITY.md): Logbook's three roles as NATS permissions, the users
// file of `coordinator serve --auth FILE`, and the making of credentials
// (`coordinator credentials new`).
//
// # Roles
//
//	coordinator  stream and bucket creation (setup), every read, consumers,
//	             rollout/mail publishing, THREADS and LEASES writes; answers
//	             logbook.api.threads.record
//	operator     every read, consumers, rollout/mail publishing, THREADS and
//	             LEASES writes, purging a subject of ROLLOUTS (gc)
//	agent        publish rollout.> and mail.>, its leases ($KV.LEASES.*),
//	             its mailbox consumer (create, fetch, ack), reads of ROLLOUTS,
//	             MAIL, THREADS and LEASES; no stream or consumer
//	             administration, no purge or delete, no THREADS writes
//
// No role deletes a stream or a message or purges MAIL, THREADS or LEASES.
// A Scope narrows an agent to listed threads (leases, mailbox) and rollouts
// (publishing). Permissions builds them; PermissionsConf renders them for
// nats-server (deploy/nats-cluster/permissions.conf, checked in step by a
// test) and UserConf renders one user for a users list there.
//
// # Users file
//
// JSON, version 1:
//
//	{"version":1,"users":[{"name":"worker-1","role":"agent","nkey":"U...",
//	  "threads":["t1"]},{"name":"alice","role":"operator","password":"$2a$..."}]}
//
// Each user has a unique name (an ID: [A-Za-z0-9_-]{1,128}), a role, and
// exactly one of a public user nkey or a bcrypt password hash; threads and
// rollouts only on an agent. Unknown fields are refused. Permissions are never
// in the file: they follow from the role, so they stay in step with the
// subjects the code uses. Save writes by temp file, fsync and rename, 0600.
package auth
