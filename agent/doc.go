// Package agent is how an agent process takes part in a Logbook tree: it
// writes its thread's rollout to the bus under a lease, spawns children and
// exchanges mail with them through the delivery protocol, and logs every
// side effect so that a crash never makes it run twice. It is the only
// public API of the module; the rules it follows live in the coordinator's
// own packages and are not written twice.
//
// # Connecting
//
// A coordinator (`coordinator serve`) sets the bus up; agents connect to it
// from any machine with Connect, giving the NATS URL (or several nodes of a
// cluster, comma-separated) and their credentials: a .creds file, an nkey
// seed, a token or user and password, and TLS settings (Options).
//
//	c, err := agent.Connect(ctx, "nats://10.0.0.5:4222", agent.Options{
//		Name:      "builder@host-3",
//		CredsFile: "/etc/logbook/agent.creds",
//		CAFile:    "/etc/logbook/ca.pem",
//	})
//
// # Threads, turns and calls
//
// A Thread is one agent thread this process writes. StartRoot creates a
// root thread; Thread.Spawn creates a child: thread_spawned is logged in the
// parent, the child's session_meta names its parent, and the task is sent
// to the child's mailbox. Client.Open opens an existing thread: it takes the
// thread's lease (refused with a *LeaseHeldError while another holder's
// lease lives) and resumes it exactly as `coordinator resume` does: a turn
// that never ended is aborted as stale, calls left without an output are
// reported unknown and the OpenOptions.Prober is asked about them, answers
// are recorded, and the replayed state is returned. Thread.Close flushes
// and releases the lease.
//
// A new thread's first rollout is named like the thread unless
// ThreadSpec.RolloutID names it. A create that died after writing the
// session_meta and before recording the thread in THREADS is finished by the
// same create again (the same ids, parent and settings: a parent's retried
// Spawn, a driver's retried StartRoot), never doubled; a rollout holding
// anything else is ErrThreadExists, with nothing written.
//
// A turn is opened with Thread.BeginTurn (task_started, turn_context and,
// for a user turn, the user's message), takes messages, response items,
// world state (full or an RFC 7396 merge patch) and checkpoints
// (Turn.Compact: a replacement history and the calls still open), and is
// ended by Turn.End with the two barriers: the body is flushed before the
// terminal record is written, the caller's announce runs between the two,
// and the terminal record is flushed after it.
//
// Every side effect goes through Turn.Call: the function_call, with its
// idempotency key, is logged and flushed before the effect runs, and the
// output is logged after. If the process dies in between, the call is
// unknown: this package never runs it again by itself. A later Open asks
// the Prober (by idempotency key) and records its answer; only a call a
// probe proved not executed may be run again, with Turn.RetryCall, and only
// when the caller asks. An effect that cannot tell what happened returns
// ErrOutcomeUnknown: no output is logged and the call stays open.
//
// # Mail
//
// Thread.Send logs inter_agent_sent and flushes it before publishing the
// message to the receiver's mailbox with its msg_id as the bus's dedupe id;
// Thread.Receive logs inter_agent_received and flushes it before
// acknowledging the message. A crash between the steps leaves what the
// coordinator reports as unconfirmed or possibly duplicated, never a
// message silently lost or silently doubled. Thread.Reply answers a task
// with a result (`coordinator unconfirmed` lists results not yet received
// by their parent).
//
// # Errors
//
// Bad use gets a typed error (errors.Is against the Err values) and writes
// nothing: an invalid id (ErrInvalidID), a record over the bus's limit
// (ErrTooLarge), an output for a call this Thread has not open
// (ErrUnknownCall), a retry nobody proved safe (ErrNotProven), a turn record
// outside a turn (ErrNoTurn). Once another writer has taken the thread over,
// every call fails with ErrFenced or ErrLeaseLost and nothing more is
// written: open the thread again to go on.
//
// A Client is safe for concurrent use; a Thread and its Turn are used by
// one goroutine at a time.
//
// # Example
//
// A root agent runs a turn with one side effect and spawns a child; a
// worker (another process, on another machine) opens the child, receives
// its task and replies; the root receives the result.
//
//	ctx := context.Background()
//	c, _ := agent.Connect(ctx, url, agent.Options{Name: "planner"})
//	root, _ := c.StartRoot(ctx, agent.ThreadSpec{ID: "root", Role: "planner"})
//	turn, _ := root.BeginTurn(ctx, agent.TurnSpec{UserText: "ship v2"})
//	out, _ := turn.Call(ctx, agent.CallSpec{Name: "tag", Arguments: `{"tag":"v2"}`, IdempotencyKey: "tag-v2"},
//		func(ctx context.Context) (string, error) { return tagRelease(ctx, "v2") })
//	child, _ := root.Spawn(ctx, agent.ThreadSpec{ID: "build", Role: "builder"}, agent.Task{Body: "build v2"})
//	turn.End(ctx, nil)
//
//	// in the worker
//	kid, _, _ := w.Open(ctx, child.ID, agent.OpenOptions{Prober: myProber})
//	tasks, _ := kid.Receive(ctx, 1, 5*time.Second)
//	kid.Reply(ctx, tasks[0], "built")
//	kid.Close(ctx)
//
//	// back in the root
//	results, _ := root.Receive(ctx, 1, 5*time.Second)
//
// The package's Example runs exactly this (with errors checked) against an
// embedded bus; docs/PROTOCOL.md describes the same protocol on the wire for
// agents written in other languages.
package agent
