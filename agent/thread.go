package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/oklog/ulid/v2"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/reconcile"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// History modes a thread is created in (ThreadSpec.HistoryMode).
const (
	// Legacy threads undo turns with a rollback marker (Thread.Rollback).
	Legacy = rollout.HistoryLegacy
	// Paginated threads undo turns by a revert to a new rollout
	// (`coordinator revert`).
	Paginated = rollout.HistoryPaginated
)

// ThreadSpec describes a thread to create.
type ThreadSpec struct {
	ID          string // the thread id; default a new ULID
	RolloutID   string // its first rollout's id; default the thread id
	Role        string // agent_role: what this agent is for ("build", "deploy" ...)
	Cwd         string // its working directory
	HistoryMode string // Legacy (default) or Paginated
}

// State is a thread's replayed state: settings, world state, the history
// in effect, its turns, and its dangling calls.
type State = replay.State

// Thread is one agent thread this process writes: it holds the thread's
// lease (its epoch fences any older writer) and its rollout's writer. A
// Thread is used by one goroutine at a time.
type Thread struct {
	c       *Client
	id      string
	rollout string
	lease   *stream.Lease
	w       *stream.Writer

	mu        sync.Mutex
	closed    bool
	turn      *Turn
	calls     map[string]rollout.OpenCall // calls this Thread logged and not yet given an output
	used      map[string]bool             // call ids this Thread logged
	inherited []rollout.OpenCall          // calls a resume left open (unknown)
	proven    map[string]rollout.OpenCall // calls a probe proved never executed (Open)
	mb        *stream.Mailbox
}

// ID is the thread id.
func (t *Thread) ID() string { return t.id }

// Rollout is the id of the rollout this Thread writes.
func (t *Thread) Rollout() string { return t.rollout }

// Epoch is the thread's lease epoch: every record this Thread writes
// carries it, and a writer with a lower one is fenced.
func (t *Thread) Epoch() uint64 { return t.lease.Epoch() }

// StartRoot creates a root thread (no parent) and opens it for writing:
// its session_meta is on the bus when StartRoot returns.
func (c *Client) StartRoot(ctx context.Context, spec ThreadSpec) (*Thread, error) {
	return c.create(ctx, spec, "")
}

// create writes a new thread's session_meta under its lease and records the
// thread in THREADS; a thread id already there is refused. A create that
// died between the two left the session_meta on the bus: the same create
// again (same ids and settings) finishes it instead of writing a second
// rollout for the thread.
func (c *Client) create(ctx context.Context, spec ThreadSpec, parent string) (*Thread, error) {
	spec, err := c.checkNew(ctx, spec, parent)
	if err != nil {
		return nil, err
	}
	return c.createChecked(ctx, spec, parent)
}

// createChecked is create for a spec checkNew passed (defaults filled).
func (c *Client) createChecked(ctx context.Context, spec ThreadSpec, parent string) (*Thread, error) {
	lease, err := c.bus.TakeLease(ctx, spec.ID, stream.LeaseOptions{Holder: c.name})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	// Under the lease nobody else writes the rollout: what it holds now is
	// an interrupted create's.
	recs, err := c.toWrite(ctx, spec, parent)
	if err != nil {
		lease.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	t, err := c.bind(ctx, lease, spec.RolloutID)
	if err != nil {
		lease.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	for _, r := range recs {
		if err := t.append(ctx, func(*rollout.Builder) rollout.Record { return r }); err != nil {
			t.abandon(ctx)
			return nil, err
		}
	}
	t.w.Materialize()
	if err := t.w.Flush(ctx); err != nil {
		t.abandon(ctx)
		return nil, fmt.Errorf("agent: thread %s: %w", spec.ID, err)
	}
	if cur, err := c.bus.RecordThread(ctx, spec.ID, spec.RolloutID); err != nil || cur != spec.RolloutID {
		t.abandon(ctx)
		if err == nil {
			err = fmt.Errorf("%w: thread %s was created meanwhile with rollout %s", ErrInvalid, spec.ID, cur)
		}
		return nil, fmt.Errorf("agent: %w", err)
	}
	return t, nil
}

// checkNew fills spec's defaults and refuses it when the thread exists: a
// THREADS entry, a rollout of the thread other than the one spec names, or
// that rollout holding anything but what this create writes (a refusal
// before Spawn logs anything; create looks again under the lease).
func (c *Client) checkNew(ctx context.Context, spec ThreadSpec, parent string) (ThreadSpec, error) {
	if spec.ID == "" {
		spec.ID = ulid.Make().String()
	}
	if spec.RolloutID == "" {
		spec.RolloutID = spec.ID // a retried create finds what an interrupted one left
	}
	if spec.HistoryMode == "" {
		spec.HistoryMode = Legacy
	}
	if spec.HistoryMode != Legacy && spec.HistoryMode != Paginated {
		return spec, fmt.Errorf("agent: thread %s: %w: history mode %q (want %q or %q)", spec.ID, ErrInvalid, spec.HistoryMode, Legacy, Paginated)
	}
	for _, id := range [][2]string{{"thread id", spec.ID}, {"rollout id", spec.RolloutID}} {
		if err := rollout.ValidateID(id[0], id[1]); err != nil {
			return spec, fmt.Errorf("agent: %w", err)
		}
	}
	src, err := ops.Load(ctx, c.bus, spec.ID)
	switch {
	case errors.Is(err, ops.ErrNoThread) && spec.RolloutID == spec.ID:
		return spec, nil // Load found no rollout of that name either
	case errors.Is(err, ops.ErrNoThread):
	case err != nil:
		return spec, fmt.Errorf("agent: thread %s: %w", spec.ID, err)
	case src.PointerRev != 0 || src.Current != spec.RolloutID:
		return spec, fmt.Errorf("agent: thread %s (rollout %s): open it instead: %w", spec.ID, src.Current, ErrThreadExists)
	}
	_, err = c.toWrite(ctx, spec, parent)
	return spec, err
}

// toWrite is what create writes to spec's rollout: its session_meta, or
// nothing when an interrupted create of the same thread (same ids, parent
// and settings) wrote it; a rollout holding anything else is refused.
func (c *Client) toWrite(ctx context.Context, spec ThreadSpec, parent string) ([]rollout.Record, error) {
	meta := rollout.SessionMeta{ID: spec.ID, RolloutID: spec.RolloutID, ParentThreadID: parent,
		Source: rollout.Source{Kind: "agent"}, AgentRole: spec.Role, Cwd: spec.Cwd, HistoryMode: spec.HistoryMode}
	recs := []rollout.Record{(&rollout.Builder{}).Meta(meta)}
	u, err := ops.FindUnrecorded(ctx, c.bus, spec.RolloutID)
	if err == nil && u != nil {
		recs, err = u.Finish(recs)
		if errors.Is(err, ops.ErrOtherCreate) {
			err = fmt.Errorf("%w: %w", ErrThreadExists, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("agent: thread %s: %w", spec.ID, err)
	}
	return recs, nil
}

// bind opens a writer for rolloutID under lease.
func (c *Client) bind(ctx context.Context, lease *stream.Lease, rolloutID string) (*Thread, error) {
	w, err := c.bus.OpenWriter(ctx, lease, rolloutID, stream.WriterOptions{})
	if err != nil {
		return nil, fmt.Errorf("agent: thread %s: %w", lease.Thread(), err)
	}
	return c.newThread(lease, rolloutID, w), nil
}

func (c *Client) newThread(lease *stream.Lease, rolloutID string, w *stream.Writer) *Thread {
	return &Thread{c: c, id: lease.Thread(), rollout: rolloutID, lease: lease, w: w,
		calls: map[string]rollout.OpenCall{}, used: map[string]bool{}, proven: map[string]rollout.OpenCall{}}
}

// Task is what a parent asks of a child.
type Task struct {
	// Body is the task itself, any JSON value (nil: none).
	Body any
	// IdempotencyKey names the task's intent: a re-sent task keeps it, so
	// the child can tell a repeat. Default "task:<child id>".
	IdempotencyKey string
}

// Child is a spawned thread: created, with its task sent to its mailbox.
// Nobody holds its lease: the process (or worker) that runs it opens it
// with Client.Open.
type Child struct {
	ID, Rollout string
	TaskMsgID   string
}

// Spawn creates a child thread of t and sends it its task through the
// delivery protocol. In order, each flushed before the next starts:
// thread_spawned in t; the child's session_meta (parent_thread_id = t);
// inter_agent_sent in t; the publish to the child's mailbox. A crash in
// between leaves what a resume and `coordinator unconfirmed` report: a
// child that never wrote a line, or a task logged and not published.
func (t *Thread) Spawn(ctx context.Context, spec ThreadSpec, task Task) (*Child, error) {
	if spec.ID == "" {
		spec.ID = ulid.Make().String()
	}
	if err := rollout.ValidateID("thread id", spec.ID); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	body, err := jsonBody(task.Body)
	if err != nil {
		return nil, fmt.Errorf("agent: task for %s: %w", spec.ID, err)
	}
	if task.IdempotencyKey == "" {
		task.IdempotencyKey = "task:" + spec.ID
	}
	if err := t.usable(); err != nil {
		return nil, err
	}
	if spec, err = t.c.checkNew(ctx, spec, t.id); err != nil {
		return nil, fmt.Errorf("agent: spawn: %w", err)
	}
	if err := t.append(ctx, func(b *rollout.Builder) rollout.Record {
		return b.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: spec.ID, AgentRole: spec.Role})
	}); err != nil {
		return nil, err
	}
	if err := t.w.Flush(ctx); err != nil {
		return nil, t.failed(err)
	}
	child, err := t.c.createChecked(ctx, spec, t.id)
	if err != nil {
		return nil, err
	}
	rid := child.rollout
	if err := child.Close(ctx); err != nil {
		return nil, err
	}
	msgID, err := t.send(ctx, rollout.InterAgentSent{ToThread: spec.ID, Kind: rollout.MsgTask, Body: body, IdempotencyKey: task.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	return &Child{ID: spec.ID, Rollout: rid, TaskMsgID: msgID}, nil
}

// Prober finds out whether a call's effect (or a message) happened in the
// world, by its idempotency key: Client.Open asks it about every call
// left without a result.
type Prober = reconcile.Prober

// Question is what a Prober is asked; Answer what it found.
type (
	Question = reconcile.Question
	Answer   = reconcile.Answer
)

// ErrNotAsked is a Prober's "nobody could be asked": nothing is recorded.
var ErrNotAsked = reconcile.ErrNotAsked

// Outcomes a Prober answers.
const (
	Executed    = rollout.OutcomeExecuted
	NotExecuted = rollout.OutcomeNotExecuted
	Unknown     = rollout.OutcomeUnknown
)

// OpenOptions tune Client.Open.
type OpenOptions struct {
	// Prober is asked about calls left without a result (nil: nobody is;
	// they stay unknown).
	Prober Prober
	// Model is the model the resumed thread will use (a change is
	// reported in the state's warnings).
	Model string
	// RetryProvenNotExecuted re-sends the messages the MAIL stream proved
	// were never published, under their original msg_id.
	RetryProvenNotExecuted bool
}

// Resumed is what Open found and did.
type Resumed struct {
	State *State
	// Aborted is the turn that had started and never ended, now closed
	// with turn_aborted{stale_after_crash} ("" when none).
	Aborted string
	// Unknown are the calls still without a result: never re-run by this
	// package. Those a probe proved never executed may be retried with
	// Thread.RetryCall; the others need a person (`coordinator reconcile`).
	Unknown []replay.Call
	// Findings are the Prober's answers, recorded in the rollout.
	Findings []reconcile.Finding
	// Resent are the msg_ids re-sent (RetryProvenNotExecuted).
	Resent []string
}

// Open takes an existing thread's lease and resumes it exactly as
// `coordinator resume` does: the stale turn is aborted, calls without a
// result are reported unknown and the Prober asked about them, answers are
// recorded, and nothing is re-run. While another holder's lease lives it
// fails with a *LeaseHeldError (ErrLeaseHeld) and writes nothing.
func (c *Client) Open(ctx context.Context, thread string, o OpenOptions) (*Thread, *Resumed, error) {
	if err := rollout.ValidateID("thread id", thread); err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	lease, err := c.bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: c.name})
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	rep, err := reconcile.Resume(ctx, c.bus, thread, reconcile.ResumeOptions{
		Holder: c.name, Prober: o.Prober, Model: o.Model, Lease: lease,
		RetryProvenNotExecuted: o.RetryProvenNotExecuted,
		Deliveries: func(ctx context.Context) ([]dedupe.Delivery, error) {
			corpus, err := ops.CorpusFromBus(ctx, c.bus, thread)
			if err != nil {
				return nil, err
			}
			return tree.Build(corpus, tree.Options{}).Deliveries, nil
		},
	})
	if err != nil {
		lease.Release(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("agent: open %s: %w", thread, err)
	}
	// The writer continues at the tail the resume read (and extended past
	// what it appended): the rollout is not read a third time.
	w, err := c.bus.OpenWriterAt(ctx, lease, rep.Rollout, rep.Tail, stream.WriterOptions{})
	if err != nil {
		lease.Release(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("agent: thread %s: %w", thread, err)
	}
	t := c.newThread(lease, rep.Rollout, w)
	res := &Resumed{State: rep.State, Aborted: rep.Aborted, Findings: rep.Findings, Resent: rep.Resent}
	if rep.State != nil {
		res.Unknown = rep.State.DanglingCalls
		for _, c := range rep.State.DanglingCalls {
			t.inherited = append(t.inherited, rollout.OpenCall{CallID: c.CallID, Name: c.Name, IdempotencyKey: c.IdempotencyKey, TurnID: c.TurnID})
			t.used[c.CallID] = true
		}
	}
	for _, f := range rep.Findings {
		if f.Question.CallID != "" && f.Answer.Outcome == rollout.OutcomeNotExecuted {
			t.proven[f.Question.CallID] = rollout.OpenCall{CallID: f.Question.CallID, Name: f.Question.Name,
				IdempotencyKey: f.Question.IdempotencyKey, TurnID: f.Question.TurnID}
		}
	}
	return t, res, nil
}

// State replays the thread from the bus: what a resume would start from.
func (t *Thread) State(ctx context.Context) (*State, error) {
	if err := t.w.Flush(ctx); err != nil {
		return nil, t.failed(err)
	}
	src, err := ops.Load(ctx, t.c.bus, t.id)
	if err != nil {
		return nil, fmt.Errorf("agent: thread %s: %w", t.id, err)
	}
	return replay.Fast(src.View, replay.Options{})
}

// Rollback takes the last n user turns of a legacy thread out of effect
// (thread_rolled_back{n}, flushed). What those turns did in the world is
// not undone. It fails, writing nothing, inside a turn, on a paginated
// thread, or when fewer than n user turns are in effect.
func (t *Thread) Rollback(ctx context.Context, n int64) error {
	if err := t.usable(); err != nil {
		return err
	}
	if t.turn != nil {
		return fmt.Errorf("agent: thread %s: rollback inside turn %s: %w", t.id, t.turn.id, ErrTurnOpen)
	}
	if err := t.w.Flush(ctx); err != nil {
		return t.failed(err)
	}
	src, err := ops.Load(ctx, t.c.bus, t.id)
	if err != nil {
		return fmt.Errorf("agent: thread %s: %w", t.id, err)
	}
	if _, err := ops.CheckRollback(src, n); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := t.append(ctx, func(b *rollout.Builder) rollout.Record { return b.RolledBack(n) }); err != nil {
		return err
	}
	if err := t.w.Flush(ctx); err != nil {
		return t.failed(err)
	}
	return nil
}

// Close flushes what the thread wrote and releases its lease, so another
// process may open it at once. A turn still open stays open in the log:
// the next Open aborts it as stale. A Thread whose lease was lost touches
// nothing of the new holder's: neither the lease nor the mailbox.
func (t *Thread) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	err := t.w.Close(ctx)
	// The server allows a bounded number of mailboxes: only open threads
	// hold one. A mailbox is one durable consumer per thread, whoever holds
	// it: once the lease is lost (taken over, or not renewed for a TTL) it
	// is the next holder's and is left alone (one nobody uses expires after
	// stream.MailboxIdle).
	if t.mb != nil && t.lease.Err() == nil {
		if merr := t.mb.Close(context.WithoutCancel(ctx)); err == nil && merr != nil {
			err = merr
		}
	}
	if rerr := t.lease.Release(context.WithoutCancel(ctx)); err == nil && rerr != nil && !errors.Is(rerr, stream.ErrLeaseLost) {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("agent: close %s: %w", t.id, err)
	}
	return nil
}

// abandon closes a thread that failed while being created.
func (t *Thread) abandon(ctx context.Context) {
	t.closed = true
	t.w.Close(context.WithoutCancel(ctx))
	t.lease.Release(context.WithoutCancel(ctx))
}

// usable fails once the thread is closed or its writer stopped.
func (t *Thread) usable() error {
	if t.closed {
		return fmt.Errorf("agent: thread %s: %w", t.id, ErrClosed)
	}
	if err := t.w.Err(); err != nil {
		return t.failed(err)
	}
	return nil
}

// failed wraps a writer error with the thread.
func (t *Thread) failed(err error) error { return fmt.Errorf("agent: thread %s: %w", t.id, err) }

// append builds the next record and enqueues it. A refused record (too
// large, invalid) leaves nothing written.
func (t *Thread) append(ctx context.Context, build func(b *rollout.Builder) rollout.Record) error {
	if err := t.usable(); err != nil {
		return err
	}
	b := rollout.Builder{Next: t.w.Next()}
	if _, err := t.w.Append(ctx, build(&b)); err != nil {
		return t.failed(err)
	}
	return nil
}

// appendAll enqueues records as one unit: if any is refused, none is.
func (t *Thread) appendAll(ctx context.Context, builds ...func(b *rollout.Builder) rollout.Record) error {
	if err := t.usable(); err != nil {
		return err
	}
	b := rollout.Builder{Next: t.w.Next()}
	recs := make([]rollout.Record, len(builds))
	for i, build := range builds {
		recs[i] = build(&b)
	}
	if _, err := t.w.AppendAll(ctx, recs...); err != nil {
		return t.failed(err)
	}
	return nil
}

// jsonBody marshals a body; raw JSON stays as given.
func jsonBody(v any) (json.RawMessage, error) {
	switch b := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(b) {
			return nil, fmt.Errorf("%w: body is not valid JSON", ErrInvalid)
		}
		return b, nil
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: body: %v", ErrInvalid, err)
		}
		return raw, nil
	}
}
