package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// reducer folds records into projections. Lifecycle (turns) and the physical
// projections (dangling calls, tokens spent) see every record; the others see
// records in effect only. It does no I/O.
type reducer struct {
	rules turnRules

	// lifecycle
	turns    []Turn
	rolled   []bool // per turn: its start is out of effect
	terminal []bool // per turn: a terminal event was seen
	turnByID map[string]int
	cur      int    // physical current turn (an index in turns), -1: none or not kept
	curID    string // its id, kept even when the turn itself is not
	open     int    // turn open since the last boundary, -1: none
	// keepFrom: turns that start before it are not kept, and warnFrom:
	// warnings before it are not kept. The naive fold knows from its first
	// pass that nothing before them can reach the state; -1 keeps all.
	keepFrom, warnFrom int64

	// projections in effect
	history     []json.RawMessage
	world       json.RawMessage // nil: no baseline in effect
	window      int
	tc          rollout.TurnContext
	tokenUsage  json.RawMessage
	tokensSpent json.RawMessage
	checkpoint  int64 // offset of the newest in-effect compaction with a replacement history; -1: none
	warnings    []Warning

	// dangling calls, in order of appearance
	calls   []Call
	callIdx map[string]int
	gone    []bool
}

func newReducer(rules turnRules) *reducer {
	return &reducer{
		rules:      rules,
		turnByID:   map[string]int{},
		cur:        -1,
		open:       -1,
		keepFrom:   -1,
		warnFrom:   -1,
		window:     1,
		checkpoint: -1,
		callIdx:    map[string]int{},
	}
}

func (r *reducer) warn(f *fact, code, format string, args ...any) {
	if f.off() < r.warnFrom {
		return
	}
	r.warnings = append(r.warnings, Warning{
		Code: code, Message: fmt.Sprintf(format, args...),
		Ordinal: f.e.Ordinal, Line: f.e.Line, Offset: f.off(),
	})
}

// where names a record in messages: its ordinal, else its line or offset.
func where(f *fact) string {
	switch {
	case f.e.Ordinal > 0:
		return "ordinal " + strconv.FormatInt(f.e.Ordinal, 10)
	case f.e.Line > 0:
		return "line " + strconv.Itoa(f.e.Line)
	default:
		return "offset " + strconv.FormatInt(f.off(), 10)
	}
}

// turnID names the turn a turn-starting record opens.
func turnID(f *fact) string {
	if f.k == kTaskStarted {
		if id, ok := rollout.LookupString(f.e.Payload, "turn_id"); ok && id != "" {
			return id
		}
	}
	if f.e.Ordinal > 0 {
		return "o" + strconv.FormatInt(f.e.Ordinal, 10)
	}
	return "v0-" + strconv.Itoa(f.e.Line)
}

// lifecycle applies a record to the turn projection.
func (r *reducer) lifecycle(f *fact, inEffect bool) {
	switch {
	case r.rules.startsTurn(f):
		id := turnID(f)
		r.curID = id
		if f.off() < r.keepFrom {
			r.cur, r.open = -1, -1
			return
		}
		r.turns = append(r.turns, Turn{TurnID: id, Status: StatusInterrupted, User: f.k == kUserMessage, Ordinal: f.e.Ordinal, offset: f.off()})
		r.rolled = append(r.rolled, !inEffect)
		r.terminal = append(r.terminal, false)
		r.cur = len(r.turns) - 1
		r.open = r.cur
		r.turnByID[id] = r.cur
	case f.k == kMarker:
		r.open = -1
		if f.numTurns <= 0 {
			v := string(rollout.Lookup(f.e.Payload, "num_turns"))
			if v == "" {
				v = "(missing)"
			}
			r.warn(f, WarnBadPayload, "thread_rolled_back at %s: num_turns %s is not a positive integer; the marker cuts nothing", where(f), v)
		}
	case isUserRecord(f):
		if r.open >= 0 {
			r.turns[r.open].User = true
		}
	case f.k == kTerminal:
		ev, err := rollout.Decode[rollout.TurnEvent](&f.e.Record)
		if err != nil {
			return
		}
		target := r.cur
		if ev.TurnID != "" {
			if i, ok := r.turnByID[ev.TurnID]; ok {
				target = i
			}
		}
		if target < 0 || r.terminal[target] {
			return
		}
		r.terminal[target] = true
		if ev.Type == rollout.EventTaskComplete {
			r.turns[target].Status = StatusCompleted
		} else {
			r.turns[target].Status = StatusAborted
			r.turns[target].Reason = ev.Reason
		}
	}
}

func (r *reducer) curTurnID() string { return r.curID }

func (r *reducer) addCall(c Call) {
	if i, ok := r.callIdx[c.CallID]; ok {
		r.gone[i] = true
	}
	r.callIdx[c.CallID] = len(r.calls)
	r.calls = append(r.calls, c)
	r.gone = append(r.gone, false)
}

func (r *reducer) resolveCall(id string) {
	if i, ok := r.callIdx[id]; ok {
		r.gone[i] = true
		delete(r.callIdx, id)
		if len(r.calls) > 64 && len(r.callIdx) < len(r.calls)/4 {
			r.compactCalls()
		}
	}
}

// compactCalls drops resolved calls, so memory follows the open calls, not
// every call ever made.
func (r *reducer) compactCalls() {
	var calls []Call
	var gone []bool
	for i, c := range r.calls {
		if !r.gone[i] {
			r.callIdx[c.CallID] = len(calls)
			calls = append(calls, c)
			gone = append(gone, false)
		}
	}
	r.calls, r.gone = calls, gone
}

// physical applies what holds for every record, in effect or not: calls and
// their outputs, reconciliations, tokens spent.
func (r *reducer) physical(f *fact) {
	switch f.k {
	case kItem:
		t, _ := rollout.LookupString(f.e.Payload, "type")
		switch {
		case rollout.IsCall(t):
			it, err := rollout.Decode[rollout.ResponseItem](&f.e.Record)
			if err != nil || it.CallID == "" {
				return
			}
			r.addCall(Call{CallID: it.CallID, Name: it.Name, IdempotencyKey: it.IdempotencyKey, TurnID: r.curTurnID()})
		case rollout.IsCallOutput(t):
			if id, ok := rollout.LookupString(f.e.Payload, "call_id"); ok {
				r.resolveCall(id)
			}
		}
	case kReconciled:
		// An answer of "unknown" is kept for the audit trail; the call stays
		// dangling until someone finds out.
		if id, ok := rollout.LookupString(f.e.Payload, "call_id"); ok && id != "" {
			if outcome, _ := rollout.LookupString(f.e.Payload, "outcome"); outcome != rollout.OutcomeUnknown {
				r.resolveCall(id)
			}
		}
	case kTokenCount:
		if f.hasTotal {
			info := rollout.Lookup(f.e.Payload, "info")
			r.tokensSpent = rollout.Lookup(info, "total_token_usage")
		}
	}
}

// effect applies a record in effect to the model-facing projections.
func (r *reducer) effect(f *fact) {
	switch f.k {
	case kItem:
		r.history = append(r.history, f.e.Payload)
	case kTokenCount:
		if f.hasInfo {
			r.tokenUsage = rollout.Lookup(f.e.Payload, "info")
		}
	case kTurnContext:
		tc, err := rollout.Decode[rollout.TurnContext](&f.e.Record)
		if err != nil {
			r.warn(f, WarnBadPayload, "turn_context at %s skipped: %v", where(f), err)
			return
		}
		r.tc = tc
	case kWorldState:
		r.worldState(f)
	case kCompacted:
		r.compacted(f)
	}
}

func (r *reducer) worldState(f *fact) {
	ws, err := rollout.Decode[rollout.WorldState](&f.e.Record)
	if err != nil || ws.State == nil {
		r.warn(f, WarnBadPayload, "world_state at %s skipped: no state", where(f))
		return
	}
	if ws.Full {
		r.world = ws.State
		return
	}
	if r.world == nil {
		r.warn(f, WarnMissingBaseline, "world_state patch at %s has no full baseline in effect; skipped, not guessed", where(f))
		return
	}
	merged, err := jsonpatch.MergePatch(r.world, ws.State)
	if err != nil {
		r.warn(f, WarnBadPayload, "world_state patch at %s does not apply: %v", where(f), err)
		return
	}
	r.world = merged
}

func (r *reducer) compacted(f *fact) {
	c, err := rollout.Decode[rollout.Compacted](&f.e.Record)
	if err != nil {
		r.warn(f, WarnBadPayload, "compacted at %s skipped: %v", where(f), err)
		return
	}
	if f.hasReplacement {
		r.history = append([]json.RawMessage(nil), c.ReplacementHistory...)
		r.checkpoint = f.off()
	} else {
		users := collectUserMessages(r.history)
		r.history = legacyHistory(users, c.Message)
		r.warn(f, WarnLegacyCompaction, "compaction at %s has no replacement_history; rebuilt from %d user messages and its summary, as Codex does", where(f), len(users))
	}
	if c.WindowNumber != nil {
		r.window = *c.WindowNumber
	} else {
		r.window++
	}
	r.world = nil
}

// seedOpenCalls starts the dangling-call projection from a checkpoint's list.
func (r *reducer) seedOpenCalls(calls []rollout.OpenCall) {
	for _, c := range calls {
		r.addCall(Call{CallID: c.CallID, Name: c.Name, IdempotencyKey: c.IdempotencyKey, TurnID: c.TurnID})
	}
}

// openCalls returns the calls still dangling.
func (r *reducer) openCalls() []Call {
	var out []Call
	for i, c := range r.calls {
		if !r.gone[i] {
			out = append(out, c)
		}
	}
	return out
}

// finish fills the projections of st; turns and warnings from before
// windowStart are left out (see State.Turns).
func (r *reducer) finish(st *State, windowStart int64) {
	st.Model = r.tc.Model
	st.ApprovalPolicy = r.tc.ApprovalPolicy
	st.SandboxPolicy = r.tc.SandboxPolicy
	st.Effort = r.tc.Effort
	if r.tc.Cwd != "" {
		st.Cwd = r.tc.Cwd
	}
	st.Window = r.window
	st.WorldState = compactJSON(r.world)
	st.TokenUsage = r.tokenUsage
	st.TokensSpent = r.tokensSpent
	st.History = r.history
	for i, t := range r.turns {
		if t.offset < windowStart {
			continue
		}
		if r.rolled[i] {
			t.Status, t.Reason = StatusRolledBack, ""
		}
		st.Turns = append(st.Turns, t)
	}
	st.DanglingCalls = r.openCalls()
	for _, w := range r.warnings {
		if w.Offset >= max(r.checkpoint, 0) {
			st.Warnings = append(st.Warnings, w)
		}
	}
}

func compactJSON(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}
