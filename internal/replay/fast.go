package replay

import (
	"errors"
	"strconv"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Fast replays a log the way a resume does (rule 7): it scans backward from
// the tail to find the dependency region (the newest checkpoint in effect,
// the turn that holds it, and the newest settings, token usage and window
// base in effect), then folds that region forward. Its cost grows with the
// tail, not the history; State.Replay.RecordsRead is the proof. It gives the
// state of Naive exactly.
//
// Damage inside the region fails the replay unless opt.Salvage, in which case
// Fast falls back to the naive fold (and says so in State.Replay.Mode).
func Fast(log rollout.Log, opt Options) (*State, error) {
	return fast(log, opt, mutation{})
}

// mutation deliberately breaks the backward scan; tests use it to prove the
// property test can fail.
type mutation struct {
	// compactionsInRolledBackTurns: accept a compaction as the checkpoint even
	// when a rollback took it out of effect.
	compactionsInRolledBackTurns bool
}

// frame is a rollback marker whose cut is not complete yet.
type frame struct {
	left      int64 // user turns still to cut
	tentative []int // records seen since the frame's last turn start: out, unless no turn start precedes them
}

// backScan is the backward half of the fast path. buf holds the entries read,
// newest first; eff says which are in effect.
type backScan struct {
	rules turnRules
	mut   mutation
	buf   []fact
	eff   []bool
	stack []frame
	// segUser: a user record seen since the last boundary, reading backward.
	segUser bool

	// What the region needs, as buf indexes (-1: not found yet).
	c, tc         int // checkpoint, its in-effect turn start
	ctx, tok      int // newest in-effect turn_context, token_count with info
	spent         int // newest token_count with total_token_usage, in effect or not
	wb            int // window base: the newest in-effect compaction with window_number at or before c
	compsBetween  int // in-effect compactions between wb (or the head) and c
	done, atStart bool
}

func newBackScan(rules turnRules, mut mutation) *backScan {
	return &backScan{rules: rules, mut: mut, c: -1, tc: -1, ctx: -1, tok: -1, spent: -1, wb: -1}
}

func (b *backScan) add(f fact) {
	i := len(b.buf)
	b.buf = append(b.buf, f)
	b.eff = append(b.eff, false)
	fp := &b.buf[i]
	starts := b.rules.startsTurn(fp)

	// A turn is a user turn if a user record sits between its start and the
	// next boundary; reading backward, those records come first.
	user := false
	switch {
	case starts:
		user = b.segUser || fp.k == kUserMessage
		b.segUser = false
	case fp.k == kMarker:
		b.segUser = false
	case isUserRecord(fp):
		b.segUser = true
	}

	switch {
	case fp.k == kMarker:
		if fp.numTurns > 0 {
			b.stack = append(b.stack, frame{left: fp.numTurns})
		}
	case starts && len(b.stack) > 0:
		top := &b.stack[len(b.stack)-1]
		top.tentative = top.tentative[:0] // they belong to this turn: out
		if user {
			if top.left--; top.left == 0 {
				b.stack = b.stack[:len(b.stack)-1]
			}
		}
	case len(b.stack) > 0:
		top := &b.stack[len(b.stack)-1]
		top.tentative = append(top.tentative, i)
		if b.mut.compactionsInRolledBackTurns && fp.k == kCompacted {
			b.found(i, true)
		}
	default:
		b.eff[i] = true
	}
	b.found(i, b.eff[i])
}

// found records what the region needs from record i.
func (b *backScan) found(i int, in bool) {
	f := &b.buf[i]
	if f.k == kTokenCount && f.hasTotal && b.spent < 0 {
		b.spent = i
	}
	if !in {
		return
	}
	switch {
	case f.k == kCompacted:
		switch {
		case b.c < 0 && f.hasReplacement:
			b.c = i
			if f.hasWindow {
				b.wb = i
			}
		case b.c >= 0 && b.wb < 0:
			if f.hasWindow {
				b.wb = i
			} else {
				b.compsBetween++
			}
		}
	case f.k == kTurnContext && b.ctx < 0:
		b.ctx = i
	case f.k == kTokenCount && f.hasInfo && b.tok < 0:
		b.tok = i
	case b.rules.startsTurn(f) && b.c >= 0 && b.tc < 0:
		b.tc = i
	}
	b.done = b.c >= 0 && b.tc >= 0 && b.wb >= 0 && b.ctx >= 0 && b.tok >= 0 && b.spent >= 0
}

// physicalTurnBefore returns the buffer index of the nearest turn start
// physically before record c, or c when there is none.
func (b *backScan) physicalTurnBefore(c int) int {
	for j := c + 1; j < len(b.buf); j++ {
		if b.rules.startsTurn(&b.buf[j]) {
			return j
		}
	}
	return c
}

// beginning is called when the scan reaches the head: records still
// tentative precede every turn start of their frame's sequence, so no cut
// reaches them; they are in effect.
func (b *backScan) beginning() {
	b.atStart = true
	for _, fr := range b.stack {
		for _, i := range fr.tentative {
			b.eff[i] = true
			b.found(i, true)
		}
	}
	b.stack = nil
}

func fast(log rollout.Log, opt Options, mut mutation) (*State, error) {
	h, err := readHead(log, opt)
	if err != nil {
		return nil, err
	}
	st := &State{Replay: Stats{Mode: "fast"}}
	prefix := reads{n: h.read, end: h.readEnd}
	h.identity(st)

	bs := newBackScan(h.rules, mut)
	cur, err := log.Backward()
	if err != nil {
		return nil, err
	}
	var fallback bool
	err = rollout.Scan(cur, func(ce *rollout.CorruptionError) error {
		if ce.Torn() {
			st.Replay.TornTail = true
			st.Replay.Corruption = append(st.Replay.Corruption, damageOf(ce, false))
			return nil
		}
		if !opt.Salvage {
			return regionError(log, ce)
		}
		fallback = true
		return errStopScan
	}, func(e rollout.Entry) (bool, error) {
		bs.add(classify(e))
		return !bs.done, nil
	})
	if errors.Is(err, errStopScan) && fallback {
		return fallbackNaive(log, opt)
	}
	if err != nil {
		return nil, err
	}
	if !bs.done {
		bs.beginning()
	}
	if err := fixLines(log, h.rules, bs.buf); err != nil {
		return nil, err
	}

	r := newReducer(h.rules)
	from, stateFrom, windowStart := len(bs.buf)-1, int64(0), int64(0)
	if bs.c >= 0 {
		cf := &bs.buf[bs.c]
		stateFrom = cf.off()
		windowStart = cf.off()
		if bs.tc >= 0 {
			from, windowStart = bs.tc, bs.buf[bs.tc].off()
		} else {
			// No turn in effect holds the checkpoint: the scan read the whole
			// log. Calls after the checkpoint still belong to the physical
			// turn they were made in, which may be a rolled-back one.
			from = bs.physicalTurnBefore(bs.c)
		}
		seeded, err := seed(r, log, h, bs)
		if err != nil {
			return nil, err
		}
		if seeded.n > prefix.n {
			prefix = seeded
		}
	}
	for i := from; i >= 0; i-- {
		f := &bs.buf[i]
		r.lifecycle(f, bs.eff[i])
		if f.off() < stateFrom {
			continue
		}
		r.physical(f)
		if bs.eff[i] {
			r.effect(f)
		}
		if f.k == kUnknownType {
			st.Replay.UnknownTypes++
		}
	}
	r.finish(st, windowStart)
	st.Replay.RecordsRead = prefix.n
	for i := range bs.buf {
		if bs.buf[i].off() > prefix.end {
			st.Replay.RecordsRead++
		}
	}
	st.Replay.CheckpointOffset = -1
	if bs.c >= 0 {
		st.Replay.CheckpointOrdinal, st.Replay.CheckpointOffset = bs.buf[bs.c].e.Ordinal, bs.buf[bs.c].off()
	}
	last := &bs.buf[len(bs.buf)-1]
	if bs.done {
		st.Replay.StartOrdinal, st.Replay.StartOffset = last.e.Ordinal, last.off()
	} else if len(bs.buf) > 0 {
		st.Replay.StartOrdinal = last.e.Ordinal
	}
	if err := resolveWarningLines(log, st); err != nil {
		return nil, err
	}
	h.identityWarning(st)
	closing(st, opt)
	return st, nil
}

var errStopScan = errors.New("stop scan")

// reads is a run of records read forward from the start of a log: how many,
// and the offset of the last (-1: none).
type reads struct {
	n   int
	end int64
}

// seed gives the reducer what the region needs from before the checkpoint,
// and says which records from the start it read to find it.
func seed(r *reducer, log rollout.Log, h head, bs *backScan) (reads, error) {
	read := reads{end: -1}
	cf := &bs.buf[bs.c]
	if bs.ctx >= 0 {
		if tc, err := rollout.Decode[rollout.TurnContext](&bs.buf[bs.ctx].e.Record); err == nil {
			r.tc = tc
		}
	}
	if bs.tok >= 0 {
		r.tokenUsage = rollout.Lookup(bs.buf[bs.tok].e.Payload, "info")
	}
	if bs.spent >= 0 {
		info := rollout.Lookup(bs.buf[bs.spent].e.Payload, "info")
		r.tokensSpent = rollout.Lookup(info, "total_token_usage")
	}
	// The window before the checkpoint: the base's window_number plus the
	// compactions in effect between them, or 1 plus all of them.
	r.window = 1 + bs.compsBetween
	if bs.wb >= 0 && bs.wb != bs.c {
		if n, ok := rollout.LookupInt(bs.buf[bs.wb].e.Payload, "window_number"); ok {
			r.window = int(n) + bs.compsBetween
		}
	}
	// Dangling calls from before the checkpoint: carried by it, or found by
	// reading the log up to it.
	c, err := rollout.Decode[rollout.Compacted](&cf.e.Record)
	if err == nil && c.OpenCalls != nil {
		r.seedOpenCalls(*c.OpenCalls)
		return read, nil
	}
	pre := newReducer(h.rules)
	cur, err := log.Forward(0)
	if err != nil {
		return read, err
	}
	stop := cf.off()
	err = rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		if e.Offset >= stop {
			return false, nil
		}
		read.n, read.end = read.n+1, e.Offset
		f := classify(e)
		if pre.rules.startsTurn(&f) || f.k == kItem || f.k == kReconciled {
			pre.lifecycle(&f, true)
			pre.physical(&f)
		}
		return true, nil
	})
	if err != nil {
		return read, err
	}
	for _, call := range pre.openCalls() {
		r.addCall(call)
	}
	return read, nil
}

// fixLines gives version-0 turn starts read backward their line numbers,
// which their turn ids are made of.
func fixLines(log rollout.Log, rules turnRules, buf []fact) error {
	var need []int64
	for i := range buf {
		f := &buf[i]
		if f.e.Line == 0 && f.e.Ordinal == 0 && rules.startsTurn(f) {
			if f.k != kTaskStarted || func() bool { id, _ := rollout.LookupString(f.e.Payload, "turn_id"); return id == "" }() {
				need = append(need, f.off())
			}
		}
	}
	if len(need) == 0 {
		return nil
	}
	lines, err := log.LineNumbers(need)
	if err != nil {
		return err
	}
	for i := range buf {
		if n, ok := lines[buf[i].off()]; ok {
			buf[i].e.Line = n
		}
	}
	return nil
}

// resolveWarningLines fills the line numbers the backward reader did not know.
func resolveWarningLines(log rollout.Log, st *State) error {
	var need []int64
	for _, w := range st.Warnings {
		if w.Line == 0 {
			need = append(need, w.Offset)
		}
	}
	if len(need) == 0 {
		return nil
	}
	lines, err := log.LineNumbers(need)
	if err != nil {
		return err
	}
	for i := range st.Warnings {
		if st.Warnings[i].Line == 0 {
			st.Warnings[i].Line = lines[st.Warnings[i].Offset]
			if st.Warnings[i].Ordinal == 0 {
				st.Warnings[i].Message = replaceOffset(st.Warnings[i].Message, st.Warnings[i].Offset, st.Warnings[i].Line)
			}
		}
	}
	return nil
}

// replaceOffset rewrites "offset N" in a message as "line L" once the line is
// known, so both paths say the same thing.
func replaceOffset(msg string, off int64, line int) string {
	from := "offset " + strconv.FormatInt(off, 10)
	to := "line " + strconv.Itoa(line)
	for i := 0; i+len(from) <= len(msg); i++ {
		if msg[i:i+len(from)] == from {
			return msg[:i] + to + msg[i+len(from):]
		}
	}
	return msg
}

func fallbackNaive(log rollout.Log, opt Options) (*State, error) {
	st, err := Naive(log, opt)
	if err != nil {
		return nil, err
	}
	st.Replay.Mode = "fast-fallback" // it read every record: RecordsRead is Naive's
	return st, nil
}
