// Package gen generates random but well-formed rollouts from a seed, for the
// property test that checks the fast replay path against the naive fold, for
// the flatness test and for the benchmarks.
//
// A log is a random walk over what a harness writes: turns (user, task and
// non-user ones), settings, world-state fulls and patches (some with no
// baseline), items and tool calls (some never answered, some reconciled),
// compactions (with and without replacement history, window number and open
// calls, mid-turn and between turns), token counts (some with null info),
// rollback markers (consecutive, crossing compactions, larger than the turns
// in effect), unknown record types and copied session_meta records, in
// version-1 and version-0 (Codex) form. Open calls carried by a compaction are
// computed exactly, as a correct writer would. The same seed always gives the
// same bytes.
package gen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Config shapes a generated log.
type Config struct {
	Seed int64
	// Records is the number of records to generate (at least).
	Records int
	// V0 writes a version-0 (Codex) log: no ordinals, no crc, schema 0;
	// V0TaskStarted also uses task_started (else user_message opens turns).
	V0, V0TaskStarted bool
	// NoRollback, NoCompaction turn those records off (benchmarks).
	NoRollback bool
	// CompactEvery, when > 0, writes a compaction about every that many records
	// instead of at random.
	CompactEvery int
	// MaxRollback, when > 0, caps rollback markers at that many turns and
	// never asks for more turns than there are (benchmarks: a realistic
	// thread, not the property test's worst cases).
	MaxRollback int
}

// Gen writes one log record at a time.
type Gen struct {
	cfg   Config
	rng   *rand.Rand
	b     rollout.Builder
	line  int // lines written
	clock time.Time

	turnOpen     bool // a turn started and not terminated
	turnID       string
	turnN        int
	curTurnID    string // physical current turn, for call attribution
	sawTask      bool   // a task_started was written (v0 rules)
	openCalls    []rollout.OpenCall
	callSeq      int
	window       int
	sinceCompact int
	pending      []rollout.Record // queued records of a multi-record action
}

// New starts a log; the first record is its session_meta.
func New(cfg Config) *Gen {
	g := &Gen{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x10cb00c)), window: 1,
		clock: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}
	g.b.Now = func() time.Time { g.clock = g.clock.Add(time.Millisecond); return g.clock }
	meta := rollout.SessionMeta{ID: fmt.Sprintf("thread-%d", cfg.Seed), RolloutID: fmt.Sprintf("rollout-%d", cfg.Seed),
		Source: rollout.Source{Kind: "sim"}, Cwd: "/repo", HistoryMode: rollout.HistoryLegacy}
	if cfg.V0 {
		meta.RolloutID, meta.HistoryMode = "", ""
	} else {
		meta.SchemaVersion = rollout.Version
	}
	g.pending = append(g.pending, g.b.JSON(rollout.TypeSessionMeta, meta))
	return g
}

// All generates a whole log into memory.
func All(cfg Config) []rollout.Record {
	g := New(cfg)
	out := make([]rollout.Record, 0, cfg.Records+8)
	for len(out) < cfg.Records {
		out = append(out, g.Next())
	}
	return out
}

// Next returns the next record.
func (g *Gen) Next() rollout.Record {
	for len(g.pending) == 0 {
		g.step()
	}
	r := g.pending[0]
	g.pending = g.pending[1:]
	g.line++
	if g.cfg.V0 {
		r.Ordinal, r.CRC, r.Raw = 0, "", nil
	}
	g.track(r)
	return r
}

// track follows turns and calls exactly as replay will see them, so open
// calls carried by compactions are right.
func (g *Gen) track(r rollout.Record) {
	switch r.Type {
	case rollout.TypeEventMsg:
		switch r.EventKind() {
		case rollout.EventTaskStarted:
			id, _ := rollout.LookupString(r.Payload, "turn_id")
			g.curTurnID, g.sawTask = id, true
		case rollout.EventUserMessage:
			if g.cfg.V0 && !g.sawTask {
				g.curTurnID = "v0-" + strconv.Itoa(g.line)
			}
		case rollout.EventReconciled:
			id, _ := rollout.LookupString(r.Payload, "call_id")
			if outcome, _ := rollout.LookupString(r.Payload, "outcome"); outcome != rollout.OutcomeUnknown {
				g.resolve(id)
			}
		}
	case rollout.TypeResponseItem:
		var it rollout.ResponseItem
		_ = json.Unmarshal(r.Payload, &it)
		switch {
		case rollout.IsCall(it.Type):
			g.resolve(it.CallID)
			g.openCalls = append(g.openCalls, rollout.OpenCall{CallID: it.CallID, Name: it.Name, IdempotencyKey: it.IdempotencyKey, TurnID: g.curTurnID})
		case rollout.IsCallOutput(it.Type):
			g.resolve(it.CallID)
		}
	}
}

func (g *Gen) resolve(id string) {
	for i, c := range g.openCalls {
		if c.CallID == id {
			g.openCalls = append(g.openCalls[:i], g.openCalls[i+1:]...)
			return
		}
	}
}

func (g *Gen) p(x float64) bool { return g.rng.Float64() < x }

func (g *Gen) push(r ...rollout.Record) { g.pending = append(g.pending, r...) }

// step queues the records of one action.
func (g *Gen) step() {
	g.sinceCompact++
	if g.cfg.CompactEvery > 0 && g.sinceCompact >= g.cfg.CompactEvery {
		g.compaction()
		return
	}
	if !g.turnOpen && g.p(0.35) {
		g.startTurn()
		return
	}
	switch x := g.rng.IntN(100); {
	case x < 30:
		g.item()
	case x < 40:
		g.call()
	case x < 46:
		g.answerCall()
	case x < 52:
		g.world()
	case x < 58:
		g.tokens()
	case x < 62 && g.cfg.CompactEvery == 0:
		g.compaction()
	case x < 72:
		g.endTurn()
	case x < 77 && !g.cfg.NoRollback:
		g.rollback()
	case x < 80:
		g.push(g.b.TurnContext(g.settings()))
	case x < 82:
		g.odd()
	default:
		g.item()
	}
}

func (g *Gen) settings() rollout.TurnContext {
	models := []string{"model-large", "model-small", "model-mini"}
	policies := []string{"on-request", "never", "untrusted"}
	return rollout.TurnContext{TurnID: g.turnID, Model: models[g.rng.IntN(len(models))],
		ApprovalPolicy: policies[g.rng.IntN(len(policies))], Cwd: "/repo/" + strconv.Itoa(g.rng.IntN(3))}
}

func (g *Gen) startTurn() {
	g.turnN++
	g.turnID = fmt.Sprintf("turn-%d", g.turnN)
	g.turnOpen = true
	v0Turns := g.cfg.V0 && !(g.cfg.V0TaskStarted && g.turnN > 2)
	if !v0Turns {
		g.push(g.b.TaskStarted(g.turnID))
	}
	switch x := g.rng.IntN(10); {
	case v0Turns || x < 7:
		g.push(g.b.UserMessage("request " + g.turnID))
	case x < 8:
		g.push(g.b.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: "m-" + g.turnID,
			IdempotencyKey: "k-" + g.turnID, FromThread: "parent", Kind: rollout.MsgTask}))
	}
	if g.p(0.8) {
		g.push(g.b.TurnContext(g.settings()))
	}
	if g.p(0.5) {
		g.push(g.b.Message("user", "request "+g.turnID))
	}
}

func (g *Gen) item() {
	switch g.rng.IntN(5) {
	case 0:
		g.push(g.b.Message("user", "more "+strconv.Itoa(g.line)))
	case 1:
		g.push(g.b.JSON(rollout.TypeResponseItem, map[string]any{"type": "reasoning", "summary": []any{}}))
	case 2:
		g.push(g.b.Event(map[string]string{"type": rollout.EventAgentMessage, "message": "ok"}))
	default:
		g.push(g.b.Message("assistant", "answer "+strconv.Itoa(g.line)))
	}
}

func (g *Gen) call() {
	g.callSeq++
	id := fmt.Sprintf("call-%d", g.callSeq)
	key := ""
	if g.p(0.5) {
		key = "key-" + id
	}
	if g.p(0.2) {
		g.push(g.b.JSON(rollout.TypeResponseItem, map[string]string{"type": rollout.ItemCustomToolCall, "call_id": id, "name": "apply_patch", "input": "…"}))
		if g.p(0.7) {
			g.push(g.b.JSON(rollout.TypeResponseItem, map[string]string{"type": rollout.ItemCustomToolOutput, "call_id": id, "output": "done"}))
		}
		return
	}
	g.push(g.b.Call(id, "shell", `{"cmd":"make"}`, key))
	if g.p(0.75) {
		g.push(g.b.Output(id, "ok"))
	}
}

// answerCall answers or reconciles an open call, sometimes much later.
func (g *Gen) answerCall() {
	if len(g.openCalls) == 0 {
		g.call()
		return
	}
	c := g.openCalls[g.rng.IntN(len(g.openCalls))]
	if g.p(0.5) {
		g.push(g.b.Output(c.CallID, "late"))
		return
	}
	outcome := []string{rollout.OutcomeExecuted, rollout.OutcomeNotExecuted, rollout.OutcomeUnknown}[g.rng.IntN(3)]
	g.push(g.b.Event(rollout.Reconciled{Type: rollout.EventReconciled, CallID: c.CallID, Outcome: outcome, Evidence: "probe", By: "probe"}))
}

func (g *Gen) world() {
	if g.p(0.4) {
		g.push(g.b.World(true, map[string]any{"cwd": "/repo", "env": "local", "n": g.line}))
		return
	}
	g.push(g.b.World(false, map[string]any{"env": []string{"staging", "prod", "local"}[g.rng.IntN(3)], "drop": nil}))
}

func (g *Gen) tokens() {
	if g.p(0.15) {
		g.push(g.b.Event(map[string]any{"type": rollout.EventTokenCount, "info": nil}))
		return
	}
	g.push(g.b.TokenCount(int64(1000*g.line), int64(100+g.rng.IntN(900))))
}

func (g *Gen) compaction() {
	g.sinceCompact = 0
	c := rollout.Compacted{Message: "summary at line " + strconv.Itoa(g.line)}
	legacy := g.cfg.CompactEvery == 0 && g.p(0.2)
	if !legacy {
		c.ReplacementHistory = []json.RawMessage{
			rollout.MessageItem("user", "request "+g.turnID),
			rollout.MessageItem("assistant", "summary "+strconv.Itoa(g.line)),
		}
	}
	if g.cfg.CompactEvery > 0 || g.p(0.7) {
		g.window++
		w := g.window
		c.WindowNumber = &w
	}
	if g.cfg.CompactEvery > 0 || g.p(0.8) {
		open := append([]rollout.OpenCall{}, g.openCalls...)
		c.OpenCalls = &open
	}
	g.push(g.b.Compacted(c))
	if g.p(0.7) {
		g.push(g.b.World(true, map[string]any{"cwd": "/repo", "env": "local", "n": g.line}))
	}
	if g.p(0.6) {
		g.push(g.b.TurnContext(g.settings()))
	}
}

func (g *Gen) endTurn() {
	if !g.turnOpen {
		g.item()
		return
	}
	g.turnOpen = false
	switch {
	case g.cfg.V0 && !(g.cfg.V0TaskStarted && g.turnN > 2):
		// Old Codex logs have no terminal events.
	case g.p(0.8):
		g.push(g.b.TaskComplete(g.turnID))
	default:
		g.push(g.b.TurnAborted(g.turnID, []string{rollout.AbortInterrupted, rollout.AbortError, rollout.AbortReplaced}[g.rng.IntN(3)]))
	}
	if g.p(0.3) { // records between turns
		g.push(g.b.TokenCount(int64(1000*g.line), 10))
	}
}

func (g *Gen) rollback() {
	n := int64(1 + g.rng.IntN(3))
	if g.cfg.MaxRollback > 0 {
		n = int64(1 + g.rng.IntN(g.cfg.MaxRollback))
		g.push(g.b.RolledBack(n))
		g.turnOpen = false
		return
	}
	if g.p(0.1) {
		n = int64(g.rng.IntN(12)) // sometimes 0, sometimes more than the turns
	}
	g.push(g.b.RolledBack(n))
	if g.p(0.2) {
		g.push(g.b.RolledBack(1)) // consecutive markers add up
	}
	g.turnOpen = false
}

// odd writes what replay must keep and ignore: unknown types and kinds,
// copied session_meta records, terminal events for unknown turns.
func (g *Gen) odd() {
	switch g.rng.IntN(4) {
	case 0:
		g.push(g.b.JSON("future_record", map[string]int{"x": g.line}))
	case 1:
		g.push(g.b.Event(map[string]string{"type": "future_event", "x": "y"}))
	case 2:
		g.push(g.b.Meta(rollout.SessionMeta{ID: "parent-thread", Cwd: "/elsewhere", Source: rollout.Source{Kind: "cli"}}))
	default:
		g.push(g.b.TaskComplete("no-such-turn"))
	}
}

// OpenCalls returns the calls written so far that have no output or
// reconciliation: what a correct writer carries in a checkpoint.
func (g *Gen) OpenCalls() []rollout.OpenCall {
	return append([]rollout.OpenCall{}, g.openCalls...)
}
