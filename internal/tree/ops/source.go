package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree"
)

// ErrNoThread is returned for a thread the bus does not know.
var ErrNoThread = errors.New("ops: no such thread on the bus")

// Source is a thread as the bus holds it now.
type Source struct {
	Thread  string
	Current string // its current rollout
	// PointerRev is the THREADS entry's revision when read (0: no entry).
	PointerRev uint64
	Pointer    string // the THREADS value read
	Tail       stream.Tail
	Meta       rollout.SessionMeta // the current rollout's canonical session_meta
	Corpus     *tree.Corpus        // the current rollout and every rollout its view reaches
	View       rollout.Log
	leaves     []tree.Leaf
}

// Load reads a thread from the bus: THREADS names its current rollout,
// rollout_sealed successors are followed past a pointer not yet switched,
// and the rollouts its view reaches through history_base are read too.
func Load(ctx context.Context, bus *stream.Bus, thread string) (*Source, error) {
	if err := rollout.ValidateID("thread id", thread); err != nil {
		return nil, err
	}
	ptr, err := resolve(ctx, bus, thread)
	if err != nil {
		return nil, err
	}
	s := &Source{Thread: thread, Corpus: tree.NewCorpus(), Current: ptr.current, Pointer: ptr.pointer, PointerRev: ptr.rev, Tail: ptr.tail}
	if err := s.addFromBus(ctx, bus, s.Current, 0); err != nil {
		return nil, err
	}
	r := s.Corpus.Rollouts[s.Current]
	if r.Thread != thread {
		return nil, fmt.Errorf("ops: rollout %s belongs to thread %s, not %s", s.Current, r.Thread, thread)
	}
	s.Meta = r.Meta
	s.View, s.leaves, err = s.Corpus.View(s.Current)
	return s, err
}

// pointer is where a thread's current rollout was found.
type pointer struct {
	current, pointer string
	rev              uint64 // the THREADS entry's revision (0: no entry)
	tail             stream.Tail
}

// resolve finds a thread's current rollout: THREADS names it (else the
// rollout named like the thread), and rollout_sealed successors are
// followed past a pointer not yet switched. One get per rollout on the way.
func resolve(ctx context.Context, bus *stream.Bus, thread string) (*pointer, error) {
	if err := rollout.ValidateID("thread id", thread); err != nil {
		return nil, err
	}
	p := &pointer{}
	e, err := bus.Threads().Get(ctx, thread)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		p.current = thread // a Codex-style rollout named like its thread
	case err != nil:
		return nil, fmt.Errorf("ops: THREADS %s: %w", thread, err)
	default:
		p.current, p.pointer, p.rev = string(e.Value()), string(e.Value()), e.Revision()
	}
	for hops := 0; ; hops++ {
		last, tail, err := bus.LastRecord(ctx, p.current)
		if err != nil {
			return nil, err
		}
		if tail.Seq == 0 {
			if p.rev == 0 {
				return nil, fmt.Errorf("%w: %s (no THREADS entry and no rollout of that name)", ErrNoThread, thread)
			}
			return nil, fmt.Errorf("ops: thread %s points at rollout %s, which the bus does not hold", thread, p.current)
		}
		p.tail = tail
		if last.Type != rollout.TypeEventMsg || last.EventKind() != rollout.EventRolloutSealed || hops > 64 {
			return p, nil
		}
		succ, _ := rollout.LookupString(last.Payload, "successor_rollout_id")
		if succ == "" {
			return p, nil
		}
		p.current = succ
	}
}

// addFromBus reads a rollout (and its bases) from the bus into the corpus.
func (s *Source) addFromBus(ctx context.Context, bus *stream.Bus, id string, depth int) error {
	if _, ok := s.Corpus.Rollouts[id]; ok || depth > 64 {
		return nil
	}
	mem, err := ReadRollout(ctx, bus, id)
	if err != nil {
		return err
	}
	if err := s.Corpus.Add(mem); err != nil {
		return err
	}
	if b := s.Corpus.Rollouts[id].Meta.HistoryBase; b != nil {
		return s.addFromBus(ctx, bus, b.RolloutID, depth+1)
	}
	return nil
}

// ReadRollout reads a whole rollout from the bus into memory, lines exactly
// as stored.
func ReadRollout(ctx context.Context, bus *stream.Bus, id string) (*rollout.Mem, error) {
	entries, err := bus.ReadAll(ctx, id, 1)
	if err != nil {
		return nil, err
	}
	var data []byte
	for _, e := range entries {
		data = append(e.Record.Append(data), '\n')
	}
	return rollout.NewMem("bus:"+stream.RolloutSubject(id), data), nil
}

// Timeline replays the source's view, returning its state and every turn.
func (s *Source) Timeline() (*replay.State, []replay.TurnSpan, error) {
	return replay.Timeline(s.View, replay.Options{Salvage: true})
}

// basePosition turns a view offset into a history_base: the rollout the
// position falls in and its ordinal and byte offset there.
func (s *Source) basePosition(viewOff int64) (rollout.HistoryPosition, error) {
	rid, ord, off, err := s.Corpus.Locate(s.Current, viewOff)
	if err != nil {
		return rollout.HistoryPosition{}, err
	}
	return rollout.HistoryPosition{RolloutID: rid, EndOrdinalExclusive: ord, EndByteOffset: off}, nil
}

// CorpusFromBus reads the current views of some threads from the bus into a
// corpus.
func CorpusFromBus(ctx context.Context, bus *stream.Bus, threads ...string) (*tree.Corpus, error) {
	c := tree.NewCorpus()
	return c, addFromBus(ctx, bus, c, threads...)
}

// ThreadDeliveries is the ledger of one thread's deliveries, from the bus
// alone (no mirror, which may lag it, and nothing of threads it never
// exchanged mail with): its view is read, then the views of every thread
// it sent to or logged a receipt from, and the deliveries from or to it
// are kept. What a resume and a reconcile of the thread need, at a cost in
// its peers, not in the data dir's size.
func ThreadDeliveries(ctx context.Context, bus *stream.Bus, thread string) ([]dedupe.Delivery, error) {
	c, err := CorpusFromBus(ctx, bus, thread)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{thread: true}
	var peers []string
	for _, d := range tree.Build(c, tree.Options{}).Deliveries {
		for _, p := range []string{d.FromThread, d.ToThread} {
			if p != "" && !seen[p] {
				seen[p] = true
				peers = append(peers, p)
			}
		}
	}
	slices.Sort(peers)
	if err := addFromBus(ctx, bus, c, peers...); err != nil {
		return nil, err
	}
	var out []dedupe.Delivery
	for _, d := range tree.Build(c, tree.Options{}).Deliveries {
		if d.FromThread == thread || d.ToThread == thread {
			out = append(out, d)
		}
	}
	return out, nil
}

// addFromBus adds the current views of threads, read from the bus, to c
// (a thread with no rollout skipped, a rollout c holds kept).
func addFromBus(ctx context.Context, bus *stream.Bus, c *tree.Corpus, threads ...string) error {
	for _, th := range threads {
		src, err := Load(ctx, bus, th)
		if errors.Is(err, ErrNoThread) {
			continue
		}
		if err != nil {
			return err
		}
		for id, r := range src.Corpus.Rollouts {
			if _, ok := c.Rollouts[id]; ok {
				continue
			}
			if err := c.Add(r.Log); err != nil { // already read from the bus by Load
				return err
			}
		}
	}
	return nil
}
