package tree

import (
	"slices"
	"sort"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Thread is one logical thread: its rollouts (a revert chain, oldest first)
// and the replayed state of its current view.
type Thread struct {
	ID       string
	Rollouts []string // oldest first; the last is current
	Current  *Rollout
	State    *replay.State // nil when the view could not be replayed
	Err      error
	// effect: for each (rollout, ordinal) of this thread's records in the
	// current view, whether it is in effect.
	effect map[dedupe.Origin]bool
}

// Threads groups the corpus into threads, follows revert chains to each
// thread's current rollout, and replays every current view once. Threads
// are replayed on every core; their problems are added in thread id order,
// as one replayed thread by thread would add them.
func (c *Corpus) Threads() map[string]*Thread {
	byThread := map[string][]*Rollout{}
	for _, r := range c.Rollouts {
		byThread[r.Thread] = append(byThread[r.Thread], r)
	}
	ids := make([]string, 0, len(byThread))
	for id := range byThread {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	threads := make([]*Thread, len(ids))
	problems := make([][]Problem, len(ids))
	parallel(len(ids), func(i int) {
		t := &Thread{ID: ids[i]}
		t.Rollouts, t.Current = c.chain(ids[i], byThread[ids[i]], &problems[i])
		t.walk(c, &problems[i])
		threads[i] = t
	})
	out := make(map[string]*Thread, len(ids))
	for i, t := range threads {
		c.Problems = append(c.Problems, problems[i]...)
		out[t.ID] = t
	}
	return out
}

// chain orders a thread's rollouts along rollout_sealed successors and picks
// the current one (Chain, over the corpus). Problems go to probs.
func (c *Corpus) chain(thread string, rs []*Rollout, probs *[]Problem) ([]string, *Rollout) {
	rs = slices.Clone(rs)
	sort.Slice(rs, func(i, j int) bool { return rs[i].ID < rs[j].ID })
	links := make([]Link, len(rs))
	for i, r := range rs {
		links[i] = r.link()
	}
	ids, cur, problems := Chain(thread, links, func(id string) (Link, bool) {
		r, ok := c.Rollouts[id]
		if !ok {
			return Link{}, false
		}
		return r.link(), true
	})
	*probs = append(*probs, problems...)
	return ids, c.Rollouts[cur]
}

func (r *Rollout) link() Link { return Link{ID: r.ID, Successor: r.Successor, Updated: r.Updated} }

// walk replays the thread's current view, recording what is in effect.
// Problems go to probs.
func (t *Thread) walk(c *Corpus, probs *[]Problem) {
	w := t.Current.walked // the current rollout is its own view: replayed already
	if w == nil {
		view, leaves, err := c.View(t.Current.ID)
		if err != nil {
			t.Err = err
			t.effect = map[dedupe.Origin]bool{}
			*probs = append(*probs, Problem{Kind: "bad_base", Thread: t.ID, Rollout: t.Current.ID, Detail: err.Error()})
			return
		}
		mine := map[string]bool{}
		for _, id := range t.Rollouts {
			mine[id] = true
		}
		w = walkView(view, leaves, mine)
	}
	t.effect = w.effect
	if w.err != nil {
		t.Err = w.err
		*probs = append(*probs, Problem{Kind: "unreadable", Thread: t.ID, Rollout: t.Current.ID, Detail: w.err.Error()})
		return
	}
	t.State = w.state
}

// walked is the replay of a view: its state, and for each (rollout,
// ordinal) of the records of the rollouts in mine, whether it is in effect.
type walked struct {
	state  *replay.State
	effect map[dedupe.Origin]bool
	err    error
}

func walkView(view rollout.Log, leaves []Leaf, mine map[string]bool) *walked {
	w := &walked{effect: map[dedupe.Origin]bool{}}
	li := 0
	w.state, w.err = replay.Walk(view, replay.Options{Salvage: true}, func(e rollout.Entry, in bool) {
		for li+1 < len(leaves) && e.Offset >= leaves[li+1].Start {
			li++
		}
		id := leaves[li].Rollout
		if !mine[id] {
			return // a prefix another thread owns (a reference fork's parent)
		}
		ord := e.Ordinal
		if ord == 0 {
			ord = int64(e.Line)
		}
		w.effect[dedupe.Origin{Rollout: id, Ordinal: ord}] = in
	})
	if w.err != nil {
		w.state = nil
	}
	return w
}

// Ledger builds the delivery ledger of the whole corpus. A record a fork
// copied counts once, for its origin; a receipt is in effect when it is in
// effect in its thread's current view.
func (c *Corpus) Ledger(threads map[string]*Thread) *dedupe.Ledger {
	l := dedupe.New()
	for _, r := range c.Rollouts {
		t := threads[r.Thread]
		for _, m := range r.Messages {
			origin, copied := c.origin(r, m.Ordinal)
			in := false
			if !copied && t != nil {
				in = t.effect[origin]
			}
			owner := r.Thread // a copied record belongs to the thread it was copied from
			if copied {
				owner = c.threadOf(origin.Rollout, owner)
			}
			switch m.Kind {
			case rollout.EventInterAgentSent:
				s := m.Sent
				l.AddSend(dedupe.Send{MsgID: s.MsgID, IdempotencyKey: s.IdempotencyKey, From: owner, To: s.ToThread,
					Kind: s.Kind, InReplyTo: s.InReplyTo, Origin: origin, InEffect: in})
			case rollout.EventInterAgentReceived:
				v := m.Recv
				l.AddReceipt(dedupe.Receipt{MsgID: v.MsgID, IdempotencyKey: v.IdempotencyKey, From: v.FromThread, To: owner,
					Kind: v.Kind, InReplyTo: v.InReplyTo, Origin: origin, InEffect: in})
			case rollout.EventReconciled:
				n := m.Note
				l.AddNote(dedupe.Note{MsgID: n.MsgID, Outcome: n.Outcome, Evidence: n.Evidence, By: n.By, Origin: origin})
			}
		}
	}
	return l
}

// origin follows fork copies back to where a record was first written: a
// copy's records 2 .. end-1 are the first records of its source's view.
func (c *Corpus) origin(r *Rollout, ord int64) (dedupe.Origin, bool) {
	copied := false
	for depth := 0; depth < 64; depth++ {
		fc := r.Meta.ForkCopy
		if fc == nil || ord < 2 || ord >= fc.EndOrdinalExclusive {
			return dedupe.Origin{Rollout: r.ID, Ordinal: ord}, copied
		}
		copied = true
		origins := c.viewOrigins(fc.RolloutID)
		i := int(ord - 2)
		if i >= len(origins) {
			return dedupe.Origin{Rollout: fc.RolloutID, Ordinal: ord - 1}, copied
		}
		o := origins[i]
		src, ok := c.Rollouts[o.Rollout]
		if !ok {
			return o, copied
		}
		r, ord = src, o.Ordinal
	}
	return dedupe.Origin{Rollout: r.ID, Ordinal: ord}, copied
}

// viewOrigins lists, for each record of a rollout's view, the rollout and
// ordinal it is read from (cached).
func (c *Corpus) viewOrigins(id string) []dedupe.Origin {
	if o, ok := c.origins[id]; ok {
		return o
	}
	if c.origins == nil {
		c.origins = map[string][]dedupe.Origin{}
	}
	var out []dedupe.Origin
	if view, leaves, err := c.View(id); err == nil {
		if cur, err := view.Forward(0); err == nil {
			li := 0
			_ = rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
				for li+1 < len(leaves) && e.Offset >= leaves[li+1].Start {
					li++
				}
				ord := e.Ordinal
				if ord == 0 {
					ord = int64(e.Line)
				}
				out = append(out, dedupe.Origin{Rollout: leaves[li].Rollout, Ordinal: ord})
				return true, nil
			})
		}
	}
	c.origins[id] = out
	return out
}

func (c *Corpus) threadOf(rolloutID, fallback string) string {
	if r, ok := c.Rollouts[rolloutID]; ok {
		return r.Thread
	}
	return fallback
}
