package simcrash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree"
)

// The invariants (DESIGN §8), checked after every scenario against ground
// truth the harness keeps outside the system: the world's ledger, the
// proxies' record of every publish and of every acknowledgement the
// processes were sent, and the plan.
//
//  1. effects: every planned effect carried out exactly once, nothing else
//     (no effect executed twice, none wrongly retried, none lost);
//  2. calls in flight: a call in flight at the crash is found by a resume,
//     probed, and recorded as the world knows it; no resume leaves a call
//     unknown; no call is logged as failed;
//  3. deliveries: one send per message, each confirmed (received once, in
//     effect), except those the plan or the crash makes possibly_duplicated
//     (a re-sent task; a receipt logged before an ack that was cut);
//  4. the tree, rebuilt from the bus and from the mirror's files of every
//     rollout the processes wrote, equals the plan's: its threads, parents,
//     forks and revert chains, no problems, no orphans, nothing unknown or
//     unconfirmed;
//  5. fast replay equals the naive fold for every thread;
//  6. every acknowledged record is on the bus (the valid-tail rule) and in
//     the mirror, byte for byte; every acknowledged mail was received;
//  7. index <= mirror <= bus for every rollout, and equal once caught up.

func (r *run) check(ctx context.Context) {
	res := r.res
	r.checkEffects()
	r.checkCalls()
	rollouts, err := r.rollouts(ctx)
	if err != nil {
		res.fail("reading the tree's rollouts: %v", err)
		return
	}
	busCorpus, lines, err := r.busCorpus(ctx, rollouts)
	if err != nil {
		res.fail("reading the bus: %v", err)
		return
	}
	for _, ls := range lines {
		res.Records += int64(len(ls))
	}
	bt := tree.Build(busCorpus, tree.Options{})
	r.unconfirmed = map[string]int{}
	r.checkDeliveries(bt)
	r.checkTree("bus", bt)
	r.checkReplay(bt, busCorpus)
	r.checkPointers(ctx, bt)
	r.checkAcked(lines)
	r.checkAckedMail(bt)
	mirrorCorpus, ok := r.checkMirror(ctx, rollouts, lines)
	if ok {
		mt := tree.Build(mirrorCorpus, tree.Options{})
		r.checkTree("mirror", mt)
		if a, b := treeShape(bt), treeShape(mt); a != b {
			res.fail("the tree rebuilt from the mirror differs from the bus's:\n bus:    %s\n mirror: %s", a, b)
		}
	}
}

// 1. effects.
func (r *run) checkEffects() {
	ledger := r.world.Ledger()
	want := map[string]bool{}
	for _, k := range r.plan.Keys() {
		want[k] = true
		switch n := ledger[k]; {
		case n == 0:
			r.res.fail("effect %s was never carried out", k)
		case n > 1:
			r.res.fail("effect %s was carried out %d times", k, n)
		}
	}
	for k := range ledger {
		if !want[k] {
			r.res.fail("effect %s was carried out and is not in the plan", k)
		}
	}
	r.res.Effects = len(ledger)
}

// 2. calls in flight.
func (r *run) checkCalls() {
	found := map[string]string{} // key -> outcome a resume recorded
	for _, o := range r.opened {
		if o.res == nil {
			continue
		}
		r.res.Resent += len(o.res.Resent)
		for _, c := range o.res.Unknown {
			r.res.fail("thread %s: call %s (%s) still unknown after the resume's probe", o.thread, c.CallID, c.IdempotencyKey)
		}
		for _, f := range o.res.Findings {
			if f.Question.CallID == "" {
				continue
			}
			r.res.Findings++
			found[f.Question.IdempotencyKey] = f.Answer.Outcome
		}
	}
	if r.inflight == "" {
		return
	}
	want := "executed"
	if r.sc.Point == PointBeforeEffect {
		want = "not_executed"
	}
	switch got := found[r.inflight]; {
	case got == "":
		r.res.fail("the call in flight at the crash (%s) was never reported by a resume", r.inflight)
	case got != want:
		r.res.fail("the call in flight at the crash (%s) was reconciled as %s; the world says %s", r.inflight, got, want)
	}
}

// rollouts are every rollout the processes published to.
func (r *run) rollouts(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for _, s := range r.subjects {
		if id, ok := strings.CutPrefix(s, "rollout."); ok {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, ctx.Err()
}

// busCorpus reads every rollout from the bus by the valid-tail rule: the
// corpus and each rollout's accepted lines (lines[id][k] is ordinal k+1).
func (r *run) busCorpus(ctx context.Context, rollouts []string) (*tree.Corpus, map[string][][]byte, error) {
	c := tree.NewCorpus()
	lines := map[string][][]byte{}
	r.lastSeq = 0
	for _, id := range rollouts {
		var ls [][]byte
		var buf bytes.Buffer
		if _, _, err := r.env.bus.ValidPacks(ctx, id, func(p *stream.Packed) error {
			r.lastSeq = max(r.lastSeq, p.Seq)
			for _, l := range p.Lines {
				ls = append(ls, l)
				buf.Write(l)
				buf.WriteByte('\n')
			}
			return nil
		}); err != nil {
			return nil, nil, err
		}
		if len(ls) == 0 {
			continue // published, never stored (the crash cut it)
		}
		lines[id] = ls
		if err := c.Add(rollout.NewMem(id, buf.Bytes())); err != nil {
			return nil, nil, fmt.Errorf("rollout %s: %w", id, err)
		}
	}
	return c, lines, nil
}

// 3. deliveries.
func (r *run) checkDeliveries(t *tree.Tree) {
	plan := r.plan
	want := 0
	for _, n := range plan.Nodes {
		if n.Name != "D" {
			want += 2 // its task and its answer
		}
		if n.ResendTo != "" {
			want++
		}
		if n.Redo != nil {
			want += 2 // the redo and its answer
		}
	}
	if len(t.Deliveries) != want {
		r.res.fail("%d deliveries, the plan makes %d", len(t.Deliveries), want)
	}
	dups := 0
	for _, d := range t.Deliveries {
		state := dedupe.Confirmed
		if n := plan.Nodes[d.FromThread]; n != nil && n.ResendTo == d.ToThread && d.IdempotencyKey == taskKey(d.ToThread) {
			state = dedupe.PossiblyDuplicated // the same intent under two msg ids
		}
		receipts := 1
		if d.Receipts == 2 && r.sc.Point == PointReceiptBeforeAck && d.ToThread == r.ackCut {
			// Its receipt was logged, the ack cut: delivered again, logged
			// again. The ledger cannot know the receiver acted once.
			state, receipts = dedupe.PossiblyDuplicated, 2
			dups++
			if d.Kind == "result" {
				r.unconfirmed[d.ToThread]++ // a result not confirmed at its parent
			}
		}
		if d.State != state {
			r.res.fail("delivery %s %s -> %s (%s): %s (%s), want %s", d.Kind, short(d.FromThread), short(d.ToThread), d.MsgID, d.State, d.Reason, state)
		}
		if d.Sends != 1 {
			r.res.fail("delivery %s -> %s (%s): %d sends logged, want 1", short(d.FromThread), short(d.ToThread), d.MsgID, d.Sends)
		}
		if d.Receipts != receipts {
			r.res.fail("delivery %s -> %s (%s): %d receipts, want %d", short(d.FromThread), short(d.ToThread), d.MsgID, d.Receipts, receipts)
		}
	}
	if r.sc.Point == PointReceiptBeforeAck && dups != 1 {
		r.res.fail("the receipt whose ack was cut (to %s) should be logged twice, once per delivery: %d deliveries are", short(r.ackCut), dups)
	}
}

// short drops the scenario prefix from an id.
func short(id string) string {
	if i := strings.LastIndexByte(id, '-'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// 4. the tree.
func (r *run) checkTree(from string, t *tree.Tree) {
	for _, p := range t.Problems {
		r.res.fail("tree from the %s: %s: %s", from, p.Kind, p.Detail)
	}
	if len(t.Orphans) > 0 {
		r.res.fail("tree from the %s: orphans %v", from, t.Orphans)
	}
	if got, want := treeShape(t), r.plan.shape(); got != want {
		r.res.fail("tree from the %s:\n got:  %s\n want: %s", from, got, want)
	}
	var walk func(n *tree.Node)
	walk = func(n *tree.Node) {
		// A re-sent task has no result of its own: the ledger pairs a
		// result with the msg id it answers, and the child answers the
		// task's intent once.
		want := r.unconfirmed[n.ThreadID]
		if p := r.plan.Nodes[n.ThreadID]; p != nil && p.ResendTo != "" {
			want++
		}
		if n.Counts.UnknownCalls > 0 || n.Unconfirmed != want {
			r.res.fail("tree from the %s: %s has %d unknown calls and %d unconfirmed child results (want 0 and %d)", from, short(n.ThreadID), n.Counts.UnknownCalls, n.Unconfirmed, want)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, n := range t.Roots {
		walk(n)
	}
}

// treeShape is a tree's threads, parents, forks and chain lengths, as text.
func treeShape(t *tree.Tree) string {
	var parts []string
	var walk func(n *tree.Node, parent string)
	walk = func(n *tree.Node, parent string) {
		s := short(n.ThreadID) + "<" + parent
		if n.ForkedFromID != "" {
			s += " fork-of:" + short(n.ForkedFromID)
		}
		if len(n.Rollouts) != 1 {
			s += fmt.Sprintf(" rollouts:%d", len(n.Rollouts))
		}
		parts = append(parts, s)
		for _, c := range n.Children {
			walk(c, short(n.ThreadID))
		}
	}
	for _, n := range t.Roots {
		walk(n, "")
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// shape is the plan's tree in treeShape's form.
func (p *Plan) shape() string {
	var parts []string
	for _, n := range p.Nodes {
		parent := ""
		if n.Parent != "" {
			parent = short(n.Parent)
		}
		s := n.Name + "<" + parent
		if n.ID == p.Fork {
			s = n.Name + "<" + short(p.ForkOf) + " fork-of:" + short(p.ForkOf)
		}
		if n.ID == p.RevertOf {
			s += " rollouts:2"
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// checkPointers: THREADS names each thread's current rollout, or one of
// its chain that readers follow to it (a revert cut between its seal and
// its switch: serve's start-up roll-forward switches it).
func (r *run) checkPointers(ctx context.Context, t *tree.Tree) {
	for id, th := range t.Threads {
		e, err := r.env.bus.Threads().Get(ctx, id)
		if err != nil {
			r.res.fail("thread %s: THREADS: %v", short(id), err)
			continue
		}
		v := string(e.Value())
		if !slices.Contains(th.Rollouts, v) {
			r.res.fail("thread %s: THREADS names rollout %s, not one of its chain %v", short(id), v, th.Rollouts)
		} else if v != th.Current.ID && r.sc.Point != PointRevertAfterSeal {
			r.res.fail("thread %s: THREADS names rollout %s, its current rollout is %s", short(id), v, th.Current.ID)
		}
	}
}

// 5. replay.
func (r *run) checkReplay(t *tree.Tree, c *tree.Corpus) {
	for id, th := range t.Threads {
		if th.Current == nil {
			continue
		}
		view, _, err := c.View(th.Current.ID)
		if err != nil {
			r.res.fail("thread %s: view: %v", short(id), err)
			continue
		}
		fast, err1 := replay.Fast(view, replay.Options{})
		naive, err2 := replay.Naive(view, replay.Options{})
		if err1 != nil || err2 != nil {
			r.res.fail("thread %s: replay: fast %v, naive %v", short(id), err1, err2)
			continue
		}
		fast.Replay, naive.Replay = replay.Stats{}, replay.Stats{}
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(naive)
		if !bytes.Equal(a, b) {
			r.res.fail("thread %s: fast replay differs from the naive fold:\n fast:  %s\n naive: %s", short(id), a, b)
		}
		for _, item := range naive.History {
			var out struct {
				Type   string `json:"type"`
				Output string `json:"output"`
			}
			if json.Unmarshal(item, &out) == nil && out.Type == "function_call_output" && strings.HasPrefix(out.Output, "error:") {
				r.res.fail("thread %s: a call is logged as failed: %s", short(id), out.Output)
			}
		}
	}
}

// 6. acknowledged records and mail.
func (r *run) checkAcked(lines map[string][][]byte) {
	for _, a := range r.acked {
		id, ok := strings.CutPrefix(a.Subject, "rollout.")
		if !ok || a.Stream != stream.StreamRollouts {
			continue
		}
		r.res.Acked++
		h, err := nats.DecodeHeadersMsg(a.Header)
		if err != nil {
			r.res.fail("an acknowledged pack of %s has no readable headers: %v", id, err)
			continue
		}
		p, err := stream.DecodePack(a.Subject, a.Seq, h, a.Payload)
		if err != nil {
			r.res.fail("an acknowledged pack of %s does not decode: %v", id, err)
			continue
		}
		have := lines[id]
		for i, l := range p.Lines {
			ord := p.First + int64(i)
			switch {
			case ord > int64(len(have)):
				r.res.fail("rollout %s: ordinal %d was acknowledged (seq %d) and the bus's valid tail ends at %d: lost", id, ord, a.Seq, len(have))
			case !bytes.Equal(have[ord-1], l):
				r.res.fail("rollout %s: ordinal %d was acknowledged (seq %d) with other bytes than the bus's valid tail holds", id, ord, a.Seq)
			}
		}
	}
}

// checkAckedMail: every mail publish acknowledged to a process was
// received.
func (r *run) checkAckedMail(t *tree.Tree) {
	received := map[string]bool{}
	for _, d := range t.Deliveries {
		if d.Receipts > 0 {
			received[d.MsgID] = true
		}
	}
	for _, a := range r.acked {
		if a.Stream != stream.StreamMail {
			continue
		}
		if id := a.HeaderValue("Nats-Msg-Id"); !received[id] {
			r.res.fail("mail %s to %s was acknowledged as stored and never received", id, short(strings.TrimPrefix(a.Subject, "mail.")))
		}
	}
}

// 7. the mirror and the index: index <= mirror <= bus (the tree is done:
// its rollouts no longer grow on the bus; the index is read before the
// mirror, and each can only grow), then equal once caught up. It returns
// the corpus of the mirror files.
func (r *run) checkMirror(ctx context.Context, rollouts []string, lines map[string][][]byte) (*tree.Corpus, bool) {
	m, ix := r.env.mirrorNow()
	if m == nil {
		r.res.fail("the mirror is not running")
		return nil, false
	}
	last := r.lastSeq
	for _, id := range rollouts {
		if len(lines[id]) == 0 {
			continue
		}
		indexed := int64(0)
		if ix != nil {
			if ro, found, err := ix.Rollout(ctx, id); err == nil && found {
				indexed = ro.WatermarkOrdinal
			}
		}
		mirrored, _, err := r.mirrorLines(id)
		if err != nil {
			r.res.fail("rollout %s: %v", id, err)
			return nil, false
		}
		onBus := int64(len(lines[id]))
		if indexed > int64(len(mirrored)) || int64(len(mirrored)) > onBus {
			r.res.fail("rollout %s: index %d, mirror %d, bus %d records: not index <= mirror <= bus", id, indexed, len(mirrored), onBus)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for m.Watermark() < last {
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.res.fail("the mirror did not reach stream sequence %d within 30s (watermark %d)", last, m.Watermark())
			return nil, false
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := tree.NewCorpus()
	for _, id := range rollouts {
		want := lines[id]
		if len(want) == 0 {
			continue
		}
		got, data, err := r.mirrorLines(id)
		if err != nil {
			r.res.fail("rollout %s: %v", id, err)
			return nil, false
		}
		if len(got) != len(want) {
			r.res.fail("rollout %s: the mirror holds %d records, the bus %d", id, len(got), len(want))
		}
		for i := range min(len(got), len(want)) {
			if !bytes.Equal(got[i], want[i]) {
				r.res.fail("rollout %s: ordinal %d differs between the mirror and the bus", id, i+1)
				break
			}
		}
		if err := c.Add(rollout.NewMem(id, data)); err != nil {
			r.res.fail("rollout %s: mirror file: %v", id, err)
			return nil, false
		}
		if ix == nil {
			continue
		}
		for {
			ro, found, err := ix.Rollout(ctx, id)
			if err != nil {
				r.res.fail("rollout %s: index: %v", id, err)
				break
			}
			if found && ro.WatermarkOrdinal == int64(len(got)) {
				break
			}
			if found && ro.WatermarkOrdinal > int64(len(got)) {
				r.res.fail("rollout %s: the index holds %d records, the mirror %d", id, ro.WatermarkOrdinal, len(got))
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.res.fail("rollout %s: the index did not catch up with the mirror (%d records) within 30s", id, len(got))
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return c, true
}

// mirrorLines reads a rollout's mirror file (none yet: no lines).
func (r *run) mirrorLines(id string) ([][]byte, []byte, error) {
	data, err := os.ReadFile(datadir.PlainPath(r.env.Dir, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var out [][]byte
	for rest := data; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break // a torn tail is not a record
		}
		out = append(out, rest[:i])
		rest = rest[i+1:]
	}
	return out, data, nil
}
