package replay

import (
	"slices"
	"sort"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// interval is a closed range of byte offsets out of effect.
type interval struct{ lo, hi int64 }

// effectPass decides, reading forward, which records a rollback took out of
// effect. It keeps the turns in effect as a stack and appends one interval
// per marker: from the start of the Nth-newest user turn in effect (or of
// the oldest turn in effect, when there are fewer) through the marker.
type effectPass struct {
	rules turnRules
	stack []turnMark
	open  int // stack index of the turn open since the last boundary; -1
	cuts  []interval
	// exceeded counts markers asking for more user turns than are in effect.
	exceeded int
	// checkpoints are the compactions with a replacement history, each with
	// the in-effect turn start before it (-1: none). If one survives every
	// later cut, so does that turn: a cut reaching the turn reaches it too.
	checkpoints []checkpointMark
}

type checkpointMark struct{ off, turn int64 }

type turnMark struct {
	off  int64
	user bool
}

func (p *effectPass) add(f *fact) {
	switch {
	case f.k == kMarker:
		p.open = -1
		p.cut(f)
	case p.rules.startsTurn(f):
		p.stack = append(p.stack, turnMark{off: f.off(), user: f.k == kUserMessage})
		p.open = len(p.stack) - 1
	case isUserRecord(f):
		if p.open >= 0 {
			p.stack[p.open].user = true
		}
	case f.k == kCompacted && f.hasReplacement:
		turn := int64(-1)
		if n := len(p.stack); n > 0 {
			turn = p.stack[n-1].off
		}
		p.checkpoints = append(p.checkpoints, checkpointMark{f.off(), turn})
	}
}

// window returns where the state's window will start (the turn holding the
// newest checkpoint in effect, else that checkpoint) and that checkpoint;
// -1, -1 when no checkpoint survives.
func (p *effectPass) window(m *effectMap) (from, checkpoint int64) {
	for i := len(p.checkpoints) - 1; i >= 0; i-- {
		c := p.checkpoints[i]
		if m.covers(c.off) {
			continue
		}
		if c.turn >= 0 {
			return c.turn, c.off
		}
		return c.off, c.off
	}
	return -1, -1
}

func (p *effectPass) cut(f *fact) {
	m := f.off()
	if f.numTurns <= 0 || len(p.stack) == 0 {
		p.cuts = append(p.cuts, interval{m, m}) // a marker is never in effect itself
		return
	}
	i, left := len(p.stack)-1, f.numTurns
	for ; i >= 0; i-- {
		if p.stack[i].user {
			if left--; left == 0 {
				break
			}
		}
	}
	if i < 0 {
		i = 0
		p.exceeded++
	}
	p.cuts = append(p.cuts, interval{p.stack[i].off, m})
	p.stack = p.stack[:i]
}

// effectMap answers "is this offset in effect" for increasing offsets.
type effectMap struct {
	cuts []interval // sorted, merged
	next int
}

func (p *effectPass) finish() *effectMap {
	cuts := slices.Clone(p.cuts)
	slices.SortFunc(cuts, func(a, b interval) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var merged []interval
	for _, c := range cuts {
		if n := len(merged); n > 0 && c.lo <= merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, c.hi)
			continue
		}
		merged = append(merged, c)
	}
	return &effectMap{cuts: merged}
}

// covers reports whether a cut covers off (any offset, any order).
func (m *effectMap) covers(off int64) bool {
	i := sort.Search(len(m.cuts), func(i int) bool { return m.cuts[i].hi >= off })
	return i < len(m.cuts) && m.cuts[i].lo <= off
}

func (m *effectMap) inEffect(off int64) bool {
	for m.next < len(m.cuts) && m.cuts[m.next].hi < off {
		m.next++
	}
	return m.next >= len(m.cuts) || off < m.cuts[m.next].lo
}

// regionTracker follows, during the fold, the records the dependency region
// reaches back to, so the naive fold draws the same region as the fast path.
type regionTracker struct {
	lastTurn  int64 // newest in-effect turn start
	lastWin   int64 // newest in-effect compaction with a window_number
	c, tc, wb int64 // checkpoint, its turn, its window base
	cOrd      int64 // the checkpoint's ordinal
	ctx, tok  int64 // newest in-effect turn_context, token_count with info
	spent     int64 // newest token_count with total_token_usage
}

func newRegionTracker() *regionTracker {
	return &regionTracker{lastTurn: -1, lastWin: -1, c: -1, tc: -1, wb: -1, ctx: -1, tok: -1, spent: -1}
}

func (t *regionTracker) see(rules turnRules, f *fact, in bool) {
	if f.k == kTokenCount && f.hasTotal {
		t.spent = f.off()
	}
	if !in {
		return
	}
	switch {
	case rules.startsTurn(f):
		t.lastTurn = f.off()
	case f.k == kTurnContext:
		t.ctx = f.off()
	case f.k == kTokenCount && f.hasInfo:
		t.tok = f.off()
	case f.k == kCompacted:
		if f.hasReplacement {
			t.c, t.tc, t.cOrd = f.off(), t.lastTurn, f.e.Ordinal
			t.wb = t.lastWin
			if f.hasWindow {
				t.wb = f.off()
			}
		}
		if f.hasWindow {
			t.lastWin = f.off()
		}
	}
}

// start is the first offset of the dependency region.
func (t *regionTracker) start() int64 {
	if t.c < 0 {
		return 0
	}
	lo := t.c
	for _, v := range []int64{t.tc, t.wb, t.ctx, t.tok, t.spent} {
		if v < 0 {
			return 0
		}
		lo = min(lo, v)
	}
	return lo
}

// windowStart is where State.Turns begin.
func (t *regionTracker) windowStart() int64 {
	switch {
	case t.c < 0:
		return 0
	case t.tc >= 0:
		return t.tc
	default:
		return t.c
	}
}

// Naive replays a log with the plain forward fold: one pass decides what is
// in effect, a second folds every record. It is the reference the fast path
// is checked against; memory is bounded by the state, not the log.
func Naive(log rollout.Log, opt Options) (*State, error) {
	st, _, err := naive(log, opt, nil, false)
	return st, err
}

// Walk is Naive that also calls visit with every record, in log order, and
// whether it is in effect (the delivery ledger needs both).
func Walk(log rollout.Log, opt Options, visit func(e rollout.Entry, inEffect bool)) (*State, error) {
	st, _, err := naive(log, opt, visit, false)
	return st, err
}

// naiveTrace is what the naive fold saw on the way, for tests.
type naiveTrace struct {
	cuts     []interval
	exceeded int
	warnings []Warning // before the window filter
	turns    []Turn    // every turn, before the window filter
	rolled   []bool
	terminal []bool
}

// naive runs the fold; keepAll keeps every turn and warning (Timeline needs
// them) instead of what the state's window can show.
func naive(log rollout.Log, opt Options, visit func(rollout.Entry, bool), keepAll bool) (*State, *naiveTrace, error) {
	h, err := readHead(log, opt)
	if err != nil {
		return nil, nil, err
	}
	// RecordsRead counts each record once: the first pass reads them all
	// (the head's records among them), the second reads them again.
	st := &State{Replay: Stats{Mode: "naive"}}
	h.identity(st)

	var damage []*rollout.CorruptionError
	onDamage := func(ce *rollout.CorruptionError) error {
		if ce.Torn() {
			st.Replay.TornTail = true
		}
		damage = append(damage, ce)
		return nil
	}
	ep := &effectPass{rules: h.rules, open: -1}
	c, err := log.Forward(0)
	if err != nil {
		return nil, nil, err
	}
	firstOrdinal := int64(0)
	err = rollout.Scan(c, onDamage, func(e rollout.Entry) (bool, error) {
		st.Replay.RecordsRead++
		if firstOrdinal == 0 {
			firstOrdinal = e.Ordinal
		}
		f := classify(e)
		if f.k == kUnknownType {
			st.Replay.UnknownTypes++
		}
		ep.add(&f)
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	effect := ep.finish()

	r := newReducer(h.rules)
	// Nothing before the window's start can reach the state: not kept.
	if !keepAll {
		r.keepFrom, r.warnFrom = ep.window(effect)
	}
	track := newRegionTracker()
	if c, err = log.Forward(0); err != nil {
		return nil, nil, err
	}
	err = rollout.Scan(c, nil, func(e rollout.Entry) (bool, error) {
		f := classify(e)
		in := effect.inEffect(f.off())
		r.lifecycle(&f, in)
		r.physical(&f)
		if in {
			r.effect(&f)
		}
		track.see(h.rules, &f, in)
		if visit != nil {
			visit(e, in)
		}
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	r.finish(st, track.windowStart())
	st.Replay.StartOrdinal = firstOrdinal
	st.Replay.CheckpointOrdinal, st.Replay.CheckpointOffset = track.cOrd, track.c

	region := track.start()
	for _, ce := range damage {
		in := !ce.Torn() && ce.Offset > region
		if !ce.Torn() {
			st.Replay.CorruptLines++
		}
		st.Replay.Corruption = append(st.Replay.Corruption, damageOf(ce, in))
		if !in {
			continue
		}
		if !opt.Salvage {
			return nil, nil, regionError(log, ce)
		}
		st.Warnings = append(st.Warnings, Warning{Code: WarnSalvaged, Message: "skipped " + ce.Error(), Ordinal: ce.Ordinal, Line: ce.Line, Offset: ce.Offset})
	}
	h.identityWarning(st)
	closing(st, opt)
	return st, &naiveTrace{cuts: effect.cuts, exceeded: ep.exceeded, warnings: r.warnings,
		turns: r.turns, rolled: r.rolled, terminal: r.terminal}, nil
}

// TurnSpan is one turn of a log with where it starts: fork, revert and the
// index need every turn, not only the current window's.
type TurnSpan struct {
	Turn
	Start    int64 // byte offset of the record that opens it
	InEffect bool  // its start is in effect (not rolled back)
	Terminal bool  // a terminal event was seen for it
}

// Timeline replays a log with the naive fold and also returns every turn in
// log order.
func Timeline(log rollout.Log, opt Options) (*State, []TurnSpan, error) {
	var spans []TurnSpan
	st, tr, err := naive(log, opt, nil, true)
	if err != nil {
		return nil, nil, err
	}
	for i, t := range tr.turns {
		s := TurnSpan{Turn: t, Start: t.offset, InEffect: !tr.rolled[i], Terminal: tr.terminal[i]}
		if tr.rolled[i] {
			s.Status, s.Reason = StatusRolledBack, ""
		}
		spans = append(spans, s)
	}
	return st, spans, nil
}
