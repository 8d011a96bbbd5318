package index

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// agentGen generates a tree of agent threads the way the coordinator's
// mirror would hold them: a parent spawns children and sends each a task,
// a child receives it, works (calls, some never answered), and sends a
// result the parent receives; with, at random, everything the delivery
// ledger and the lineage tree must follow: rollbacks (legacy threads, some
// reaching into a view's prefix), reverts (paginated threads), forks by
// copy and by reference (some mid-turn), re-sends under the same msg_id,
// duplicate receipts, one idempotency key under two msg ids, receipts that
// never come, orphan receipts, notes, compactions, children that never
// write a line, and turns left open. It is the test's own small generator;
// the records are built with rollout.Builder, as Logbook writes them.
type agentGen struct {
	rng      *rand.Rand
	now      time.Time
	rollouts []*genRollout
	threads  []*genThread
	seq      int
	cov      map[string]int // what was generated, for the coverage check
}

type genRollout struct {
	id     string
	th     *genThread
	b      rollout.Builder
	recs   []rollout.Record // its own records; recs[0] is its session_meta
	prefix []rollout.Record // its view's prefix (a history_base's), read between recs[0] and recs[1:]
	starts []int            // indexes in recs of its own task_started records
}

type genThread struct {
	id        string
	cur       *genRollout
	paginated bool
	depth     int
	turns     int
}

func newAgentGen(seed uint64) *agentGen {
	return &agentGen{rng: rand.New(rand.NewPCG(seed, 13)), now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), cov: map[string]int{}}
}

func (g *agentGen) chance(p float64) bool { return g.rng.Float64() < p }

func (g *agentGen) id(kind string) string {
	g.seq++
	return fmt.Sprintf("%s-%03d", kind, g.seq)
}

func (g *agentGen) clock() time.Time {
	g.now = g.now.Add(time.Duration(1+g.rng.IntN(1500)) * time.Millisecond)
	return g.now
}

// newRollout starts a rollout of th with meta (id fields filled in).
func (g *agentGen) newRollout(th *genThread, meta rollout.SessionMeta) *genRollout {
	r := &genRollout{id: g.id("r"), th: th}
	r.b.Now = g.clock
	meta.ID, meta.RolloutID, meta.Cwd = th.id, r.id, "/work"
	if meta.Source.Kind == "" {
		meta.Source.Kind = "sim"
	}
	if th.paginated {
		meta.HistoryMode = rollout.HistoryPaginated
	}
	r.recs = append(r.recs, r.b.Meta(meta))
	g.rollouts = append(g.rollouts, r)
	th.cur = r
	return r
}

func (g *agentGen) newThread(depth int, meta rollout.SessionMeta) *genThread {
	th := &genThread{id: g.id("t"), paginated: g.chance(0.35), depth: depth}
	g.threads = append(g.threads, th)
	g.newRollout(th, meta)
	return th
}

func (r *genRollout) add(recs ...rollout.Record) { r.recs = append(r.recs, recs...) }

// view is the rollout's view: its session_meta, its prefix, its own records.
func (r *genRollout) view() []rollout.Record {
	out := append([]rollout.Record{r.recs[0]}, r.prefix...)
	return append(out, r.recs[1:]...)
}

// offset is the byte offset of own record k in the rollout's file.
func (r *genRollout) offset(k int) int64 { return int64(len(rollout.MemOf(r.id, r.recs[:k]).Bytes())) }

// turn opens a turn in th's current rollout.
func (g *agentGen) turn(th *genThread, user bool) string {
	th.turns++
	id := fmt.Sprintf("%s-u%d", th.id, th.turns)
	r := th.cur
	r.starts = append(r.starts, len(r.recs))
	r.add(r.b.TaskStarted(id))
	if user {
		r.add(r.b.UserMessage("please do " + id))
	}
	if g.chance(0.3) {
		r.add(r.b.TurnContext(rollout.TurnContext{TurnID: id, Model: "model-" + fmt.Sprint(g.rng.IntN(3)), ApprovalPolicy: "never"}))
	}
	return id
}

// end closes a turn: mostly completed, sometimes aborted, sometimes left
// open (the writer crashed: interrupted).
func (g *agentGen) end(th *genThread, id string) {
	r := th.cur
	switch x := g.rng.Float64(); {
	case x < 0.1:
		g.cov["open turn"]++
	case x < 0.18:
		r.add(r.b.TurnAborted(id, rollout.AbortInterrupted))
	default:
		r.add(r.b.TaskComplete(id))
	}
}

// work adds calls, their outputs (some missing, some settled by a
// reconciled record) and at times a compaction.
func (g *agentGen) work(th *genThread) {
	r := th.cur
	for i := g.rng.IntN(3); i > 0; i-- {
		call := g.id("call")
		r.add(r.b.Call(call, "shell", `{"cmd":"make"}`, "idem-"+call))
		switch x := g.rng.Float64(); {
		case x < 0.15:
			g.cov["dangling call"]++
		case x < 0.22:
			r.add(r.b.Event(rollout.Reconciled{Type: rollout.EventReconciled, CallID: call, Outcome: rollout.OutcomeExecuted, Evidence: "probe", By: "probe"}))
		default:
			r.add(r.b.Output(call, "ok"))
		}
	}
	r.add(r.b.Message("assistant", "working on it"))
	if g.chance(0.12) {
		g.cov["compaction"]++
		r.add(r.b.Compacted(rollout.Compacted{Message: "summary", ReplacementHistory: []json.RawMessage{rollout.MessageItem("user", "summary")}}))
	}
}

func (g *agentGen) sent(r *genRollout, msg, key, to, kind, reply string) {
	r.add(r.b.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: msg, IdempotencyKey: key, ToThread: to, Kind: kind, InReplyTo: reply}))
}

func (g *agentGen) received(r *genRollout, msg, key, from, kind, reply string) {
	r.add(r.b.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: msg, IdempotencyKey: key, FromThread: from, Kind: kind, InReplyTo: reply}))
}

// agent runs one thread's life: a task turn when it has a parent, children
// (depth permitting), results received, and its perturbations.
func (g *agentGen) agent(th *genThread, parent *genThread, task, key string) {
	var result string
	if parent != nil {
		id := g.turn(th, false)
		switch x := g.rng.Float64(); {
		case x < 0.08:
			g.cov["task never received"]++
		case x < 0.14:
			g.cov["task received twice"]++
			g.received(th.cur, task, key, parent.id, rollout.MsgTask, "")
			g.received(th.cur, task, key, parent.id, rollout.MsgTask, "")
		default:
			g.received(th.cur, task, key, parent.id, rollout.MsgTask, "")
		}
		g.work(th)
		if !g.chance(0.1) {
			result = g.id("m")
			g.sent(th.cur, result, "res-"+task, parent.id, rollout.MsgResult, task)
			if g.chance(0.1) {
				g.cov["result re-sent"]++
				g.sent(th.cur, result, "res-"+task, parent.id, rollout.MsgResult, task)
			}
		} else {
			g.cov["no result"]++
		}
		g.end(th, id)
	}
	type kid struct {
		th        *genThread
		task, key string
	}
	var kids []kid
	if th.depth < 3 {
		n := g.rng.IntN(4 - th.depth)
		if n > 0 {
			id := g.turn(th, true)
			for i := 0; i < n; i++ {
				child := g.id("t")
				r := th.cur
				r.add(r.b.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: child, AgentRole: "worker"}))
				msg, k := g.id("m"), g.id("k")
				g.sent(r, msg, k, child, rollout.MsgTask, "")
				if g.chance(0.08) {
					g.cov["task re-sent"]++
					g.sent(r, msg, k, child, rollout.MsgTask, "")
				}
				if g.chance(0.1) {
					g.cov["never wrote a line"]++
					continue
				}
				meta := rollout.SessionMeta{AgentRole: "worker"}
				if !g.chance(0.15) { // else known only from the parent's record
					meta.ParentThreadID = th.id
				}
				c := &genThread{id: child, paginated: g.chance(0.35), depth: th.depth + 1}
				g.threads = append(g.threads, c)
				g.newRollout(c, meta)
				kids = append(kids, kid{c, msg, k})
			}
			g.work(th)
			g.end(th, id)
		}
	}
	for _, k := range kids {
		g.agent(k.th, th, k.task, k.key)
	}
	// The results come back in a later turn of the parent.
	if len(kids) > 0 {
		id := g.turn(th, true)
		for _, k := range kids {
			res := g.resultOf(k.th, k.task)
			if res == "" {
				continue
			}
			switch x := g.rng.Float64(); {
			case x < 0.1:
				g.cov["result never received"]++
			case x < 0.16:
				g.cov["result received twice"]++
				g.received(th.cur, res, "res-"+k.task, k.th.id, rollout.MsgResult, k.task)
				g.received(th.cur, res, "res-"+k.task, k.th.id, rollout.MsgResult, k.task)
			case x < 0.2:
				g.cov["one key, two msg ids"]++
				g.received(th.cur, res, "res-"+k.task, k.th.id, rollout.MsgResult, k.task)
				g.received(th.cur, g.id("m"), "res-"+k.task, k.th.id, rollout.MsgResult, k.task)
			default:
				g.received(th.cur, res, "res-"+k.task, k.th.id, rollout.MsgResult, k.task)
			}
		}
		if g.chance(0.05) {
			g.cov["orphan receipt"]++
			g.received(th.cur, g.id("m"), g.id("k"), "t-nobody", rollout.MsgNote, "")
		}
		if g.chance(0.1) {
			g.cov["note"]++
			th.cur.add(th.cur.b.Event(rollout.Reconciled{Type: rollout.EventReconciled, MsgID: kids[0].task, Outcome: rollout.OutcomeUnknown,
				Evidence: "no answer", By: "person"}))
		}
		g.work(th)
		g.end(th, id)
	}
	g.perturb(th)
}

// resultOf finds the result msg id a child sent for task, in any of its
// rollouts.
func (g *agentGen) resultOf(th *genThread, task string) string {
	for _, r := range g.rollouts {
		if r.th != th {
			continue
		}
		for _, rec := range r.recs {
			if rec.EventKind() == rollout.EventInterAgentSent {
				if m, err := rollout.Decode[rollout.InterAgentSent](&rec); err == nil && m.InReplyTo == task {
					return m.MsgID
				}
			}
		}
	}
	return ""
}

// perturb rolls back, reverts or forks th at random, then adds a turn.
func (g *agentGen) perturb(th *genThread) {
	for steps := g.rng.IntN(3); steps > 0; steps-- {
		r := th.cur
		switch x := g.rng.Float64(); {
		case x < 0.3 && !th.paginated:
			n := int64(1 + g.rng.IntN(3))
			if len(r.prefix) > 0 {
				g.cov["rollback in a view"]++
			}
			g.cov["rollback"]++
			r.add(r.b.RolledBack(n))
		case x < 0.55 && th.paginated && len(r.starts) > 0:
			g.revert(th)
		case x < 0.75:
			g.fork(th, true)
		case x < 0.9:
			g.fork(th, false)
		}
		id := g.turn(th, true)
		g.work(th)
		if g.chance(0.2) {
			// Receipts in a turn that may be rolled back or reverted later.
			g.cov["late receipt"]++
			g.received(th.cur, g.id("m"), g.id("k"), "t-elsewhere", rollout.MsgNote, "")
		}
		g.end(th, id)
	}
}

// revert writes a new rollout of th whose history_base ends before one of
// its current rollout's own turns, and seals the old one.
func (g *agentGen) revert(th *genThread) {
	old := th.cur
	k := old.starts[g.rng.IntN(len(old.starts))]
	meta, err := rollout.Decode[rollout.SessionMeta](&old.recs[0])
	if err != nil {
		panic(err)
	}
	base := &rollout.HistoryPosition{RolloutID: old.id, EndOrdinalExclusive: old.recs[k].Ordinal, EndByteOffset: old.offset(k)}
	meta.HistoryBase, meta.ForkCopy = base, nil
	next := g.newRollout(th, meta)
	next.prefix = append(append([]rollout.Record{old.recs[0]}, old.prefix...), old.recs[1:k]...)
	old.add(old.b.Event(rollout.RolloutSealed{Type: rollout.EventRolloutSealed, SuccessorRolloutID: next.id}))
	g.cov["revert"]++
	if len(old.prefix) > 0 {
		g.cov["revert of a view"]++
	}
}

// fork starts a new thread from th: by copy of a prefix of its view, or by
// reference to a position in its current rollout's own records; a position
// inside an open turn gives the child a turn_aborted for it, as ops.Fork.
func (g *agentGen) fork(src *genThread, byCopy bool) {
	r := src.cur
	k := len(r.recs) // the end
	if len(r.starts) > 0 && g.chance(0.5) {
		k = r.starts[g.rng.IntN(len(r.starts))]
	}
	child := &genThread{id: g.id("t"), paginated: src.paginated, depth: src.depth + 1}
	g.threads = append(g.threads, child)
	meta := rollout.SessionMeta{ForkedFromID: src.id, Source: rollout.Source{Kind: "fork"}}
	view := r.view()
	n := len(r.prefix) + k // view records before own record k
	if byCopy {
		g.cov["fork by copy"]++
		meta.ForkCopy = &rollout.HistoryPosition{RolloutID: r.id, EndOrdinalExclusive: int64(n + 2),
			EndByteOffset: int64(len(rollout.MemOf(r.id, view[:n]).Bytes()))}
		c := g.newRollout(child, meta)
		for _, rec := range view[:n] {
			c.add(rec.Reenvelope(c.b.Next))
			c.b.Next++
		}
	} else {
		g.cov["fork by reference"]++
		meta.HistoryBase = &rollout.HistoryPosition{RolloutID: r.id, EndOrdinalExclusive: int64(k + 1), EndByteOffset: r.offset(k)}
		if k < len(r.recs) {
			meta.HistoryBase.EndOrdinalExclusive = r.recs[k].Ordinal
		}
		c := g.newRollout(child, meta)
		c.prefix = view[:n]
	}
	if open := openTurn(view[:n]); open != "" {
		g.cov["fork mid-turn"]++
		c := child.cur
		c.add(c.b.TurnAborted(open, rollout.AbortInterrupted))
	}
	id := g.turn(child, true)
	g.work(child)
	g.end(child, id)
	if child.depth < 4 {
		g.perturb(child)
	}
}

// openTurn is the turn a prefix ends inside: started, no terminal event.
func openTurn(recs []rollout.Record) string {
	open := ""
	for _, rec := range recs {
		switch rec.EventKind() {
		case rollout.EventTaskStarted:
			open, _ = rollout.LookupString(rec.Payload, "turn_id")
		case rollout.EventTaskComplete, rollout.EventTurnAborted, rollout.EventThreadRolledBack:
			open = ""
		}
	}
	return open
}

// tree generates a tree of about the given number of root agents.
func (g *agentGen) tree(roots int) {
	for i := 0; i < roots; i++ {
		th := g.newThread(0, rollout.SessionMeta{Source: rollout.Source{Kind: "cli"}})
		g.agent(th, nil, "", "")
	}
}

// write saves every rollout into data dir dir's mirror.
func (g *agentGen) write(t testing.TB, dir string) {
	t.Helper()
	for _, r := range g.rollouts {
		writeRollout(t, dir, r.id, r.recs)
	}
}
