package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// TurnContext is a turn's settings: model, approval and sandbox policy,
// working directory, reasoning effort. Replay reports the last one in
// effect as the thread's settings.
type TurnContext = rollout.TurnContext

// TurnSpec describes a turn to begin.
type TurnSpec struct {
	// ID is the turn id; default a new ULID.
	ID string
	// Context is recorded as the turn's turn_context (its TurnID is set).
	Context TurnContext
	// UserText, when set, makes this a user turn: the user's message is
	// logged as a response item and a user_message event. Rollback counts
	// user turns. A turn started by mail (a task) leaves it empty.
	UserText string
}

// Turn is an open turn of a Thread. Its records go to the thread's writer
// in order; End seals it with the chapter's two barriers.
type Turn struct {
	t  *Thread
	id string
}

// ID is the turn id.
func (u *Turn) ID() string { return u.id }

// BeginTurn opens a turn: task_started, turn_context and, for a user turn,
// the user's message. It fails, writing nothing, while another turn is
// open. The records are enqueued, not flushed: End (or a call) flushes.
func (t *Thread) BeginTurn(ctx context.Context, spec TurnSpec) (*Turn, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if t.turn != nil {
		return nil, fmt.Errorf("agent: thread %s: turn %s is open: %w", t.id, t.turn.id, ErrTurnOpen)
	}
	if spec.ID == "" {
		spec.ID = ulid.Make().String()
	}
	if err := rollout.ValidateID("turn id", spec.ID); err != nil {
		return nil, fmt.Errorf("agent: thread %s: %w", t.id, err)
	}
	spec.Context.TurnID = spec.ID
	recs := []func(*rollout.Builder) rollout.Record{
		func(b *rollout.Builder) rollout.Record { return b.TaskStarted(spec.ID) },
		func(b *rollout.Builder) rollout.Record { return b.TurnContext(spec.Context) },
	}
	if spec.UserText != "" {
		recs = append(recs,
			func(b *rollout.Builder) rollout.Record { return b.Message("user", spec.UserText) },
			func(b *rollout.Builder) rollout.Record { return b.UserMessage(spec.UserText) })
	}
	if err := t.appendAll(ctx, recs...); err != nil {
		return nil, err
	}
	t.turn = &Turn{t: t, id: spec.ID}
	return t.turn, nil
}

// Message appends a message response item (role "user", "assistant",
// "developer" ...) to the turn.
func (u *Turn) Message(ctx context.Context, role, text string) error {
	if err := u.open(); err != nil {
		return err
	}
	if role == "" {
		return fmt.Errorf("agent: thread %s turn %s: %w: a message without a role", u.t.id, u.id, ErrInvalid)
	}
	return u.t.append(ctx, func(b *rollout.Builder) rollout.Record { return b.Message(role, text) })
}

// Item appends any response item, given as its JSON object (it must have
// a "type"). Calls go through Call, not Item: an item of type
// function_call or function_call_output is refused.
func (u *Turn) Item(ctx context.Context, item json.RawMessage) error {
	if err := u.open(); err != nil {
		return err
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(item, &head); err != nil || head.Type == "" {
		return fmt.Errorf("agent: thread %s turn %s: %w: a response item must be a JSON object with a type", u.t.id, u.id, ErrInvalid)
	}
	switch head.Type {
	case rollout.ItemFunctionCall, rollout.ItemFunctionCallOutput, rollout.ItemCustomToolCall, rollout.ItemCustomToolOutput:
		return fmt.Errorf("agent: thread %s turn %s: %w: log %s through Call, which flushes it before the effect", u.t.id, u.id, ErrInvalid, head.Type)
	}
	return u.t.append(ctx, func(b *rollout.Builder) rollout.Record { return b.Record(rollout.TypeResponseItem, item) })
}

// Settings records new settings mid-turn (a model switch, or the
// turn_context written again after a compaction).
func (u *Turn) Settings(ctx context.Context, tc TurnContext) error {
	if err := u.open(); err != nil {
		return err
	}
	tc.TurnID = u.id
	return u.t.append(ctx, func(b *rollout.Builder) rollout.Record { return b.TurnContext(tc) })
}

// World records the thread's world state: the full state, or (full false)
// an RFC 7396 JSON merge patch onto the state in effect.
func (u *Turn) World(ctx context.Context, full bool, state any) error {
	if err := u.open(); err != nil {
		return err
	}
	raw, err := jsonBody(state)
	if err != nil {
		return fmt.Errorf("agent: thread %s turn %s: world state: %w", u.t.id, u.id, err)
	}
	if raw == nil {
		return fmt.Errorf("agent: thread %s turn %s: %w: world state is nil", u.t.id, u.id, ErrInvalid)
	}
	if !full && raw[0] != '{' {
		return fmt.Errorf("agent: thread %s turn %s: %w: a merge patch is a JSON object", u.t.id, u.id, ErrInvalid)
	}
	return u.t.append(ctx, func(b *rollout.Builder) rollout.Record { return b.World(full, raw) })
}

// Compact writes a checkpoint: the history replay starts from is
// replacement (response items, as JSON objects), and the calls still
// without an output are carried in open_calls, so a resume from the
// checkpoint still reports each of them. It is flushed before it returns.
func (u *Turn) Compact(ctx context.Context, summary string, replacement []json.RawMessage) error {
	if err := u.open(); err != nil {
		return err
	}
	for i, item := range replacement {
		if !json.Valid(item) || len(item) == 0 || item[0] != '{' {
			return fmt.Errorf("agent: thread %s turn %s: %w: replacement history item %d is not a JSON object", u.t.id, u.id, ErrInvalid, i)
		}
	}
	if replacement == nil {
		replacement = []json.RawMessage{}
	}
	open := u.t.openCalls()
	c := rollout.Compacted{Message: summary, ReplacementHistory: replacement, OpenCalls: &open}
	if err := u.t.append(ctx, func(b *rollout.Builder) rollout.Record { return b.Compacted(c) }); err != nil {
		return err
	}
	if err := u.t.w.Flush(ctx); err != nil {
		return u.t.failed(err)
	}
	return nil
}

// End completes the turn with the chapter's two barriers: the body is
// flushed, task_complete is enqueued, announce (if not nil) is called with
// its ordinal, and the terminal record is flushed. Nobody should hear of
// the turn's end before announce.
func (u *Turn) End(ctx context.Context, announce func(ordinal int64)) error {
	return u.end(ctx, func(b *rollout.Builder) rollout.Record { return b.TaskComplete(u.id) }, announce)
}

// Abort ends the turn without completing it (turn_aborted{reason}), with
// the same barriers as End.
func (u *Turn) Abort(ctx context.Context, reason string) error {
	if reason == "" {
		reason = "interrupted"
	}
	return u.end(ctx, func(b *rollout.Builder) rollout.Record { return b.TurnAborted(u.id, reason) }, nil)
}

func (u *Turn) end(ctx context.Context, build func(*rollout.Builder) rollout.Record, announce func(int64)) error {
	if err := u.open(); err != nil {
		return err
	}
	t := u.t
	b := rollout.Builder{Next: t.w.Next()}
	if _, err := t.w.EndTurn(ctx, build(&b), announce); err != nil {
		return t.failed(err)
	}
	t.turn = nil
	return nil
}

// open fails unless u is the thread's open turn and the thread is usable.
func (u *Turn) open() error {
	if err := u.t.usable(); err != nil {
		return err
	}
	if u.t.turn != u {
		return fmt.Errorf("agent: thread %s: turn %s has ended: %w", u.t.id, u.id, ErrNoTurn)
	}
	return nil
}
