package ops

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// ViewOptions tune LoadView.
type ViewOptions struct {
	// DataDir is a data dir whose mirror (rollouts/) holds the thread's
	// rollouts, written from the same bus; "" reads everything from the bus.
	DataDir string
}

// ReadStats say what LoadView (and Extend) read, and from where.
type ReadStats struct {
	// MirrorOrdinal is the current rollout's last ordinal taken from its
	// mirror file: records 1..MirrorOrdinal were not read from the bus. 0
	// when the mirror was not used.
	MirrorOrdinal int64 `json:"mirror_ordinal"`
	// BusRecords counts the records of accepted packs read from the bus,
	// for the current rollout and any base read from the bus.
	BusRecords int64 `json:"bus_records"`
	// BusGets counts the ROLLOUTS messages fetched (stream.Bus.RolloutGets
	// over the load): tail lookups, the search for the mirror's last pack,
	// and every message read past it.
	BusGets int64 `json:"bus_gets"`
	// MirrorBases counts the history_base rollouts read from their mirror
	// files instead of the bus.
	MirrorBases int `json:"mirror_bases"`
	// Fallback says why a rollout was read from the bus from its start
	// although a data dir was given; "" when none was.
	Fallback string `json:"fallback"`
}

func (s *ReadStats) fallback(why string) {
	if s.Fallback == "" {
		s.Fallback = why
	} else {
		s.Fallback += "; " + why
	}
}

// View is a thread read for a resume: its current rollout's view, taken from
// the mirror as far as the mirror holds it and from the bus past that, and
// the current rollout's valid tail, which a writer opens at
// (stream.Bus.OpenWriterAt) without reading the rollout again.
type View struct {
	Thread, Current string
	Meta            rollout.SessionMeta // the current rollout's canonical session_meta
	Log             rollout.Log         // the current rollout's view
	Known           stream.KnownTail    // the current rollout's valid tail on the bus
	Read            ReadStats

	own   []rollout.Segment       // the current rollout: mirror file prefix, then bus suffixes
	heads map[string]rollout.Head // the bases
	meta  int64                   // end of the current rollout's session_meta
}

// LoadView reads a thread as Load does (THREADS, then rollout_sealed
// successors), but at a cost that grows with what the mirror lacks, not
// with the rollout: with opt.DataDir, the current rollout's mirror file is
// taken up to its last whole record, the bus message ending at that record
// is found (stream.Bus.TailAt: one get when the mirror is current, else a
// binary search), and only the messages after it are read, by the
// valid-tail rule continuing from it (stream.Bus.ValidPacksFrom). A base
// (history_base) is read from its mirror file when that file holds the
// frozen prefix exactly (the record before end_byte_offset has the ordinal
// before end_ordinal_exclusive). Without a data dir, or when a mirror file
// is absent, empty, damaged at its tail, or not what the bus holds, that
// rollout is read from the bus from its start by the valid-tail rule
// (stream.Bus.ValidPacks), and Read.Fallback says why. The mirror file is
// read only up to the size it had, so an append by a serving mirror does
// not change the view.
func LoadView(ctx context.Context, bus *stream.Bus, thread string, opt ViewOptions) (*View, error) {
	gets := bus.RolloutGets()
	ptr, err := resolve(ctx, bus, thread)
	if err != nil {
		return nil, err
	}
	v := &View{Thread: thread, Current: ptr.current, heads: map[string]rollout.Head{}}
	defer func() { v.Read.BusGets += bus.RolloutGets() - gets }()
	if err := v.readCurrent(ctx, bus, opt.DataDir); err != nil {
		return nil, err
	}
	log, err := v.ownLog()
	if err != nil {
		return nil, err
	}
	meta, end, err := headMeta(log)
	if err != nil {
		return nil, err
	}
	if meta.ID != thread {
		return nil, fmt.Errorf("ops: rollout %s belongs to thread %s, not %s", v.Current, meta.ID, thread)
	}
	v.Meta, v.meta = meta, end
	if err := v.readBases(ctx, bus, opt.DataDir, meta.HistoryBase, 0); err != nil {
		return nil, err
	}
	return v, v.build()
}

// readBases reads the chain of history_base rollouts into v.heads.
func (v *View) readBases(ctx context.Context, bus *stream.Bus, dir string, b *rollout.HistoryPosition, depth int) error {
	if b == nil || depth > 64 {
		return nil
	}
	if _, ok := v.heads[b.RolloutID]; ok {
		return nil
	}
	var log rollout.Log
	if dir != "" {
		l, why := mirrorPrefix(dir, b)
		if why == "" {
			log = l
			v.Read.MirrorBases++
		} else {
			v.Read.fallback("base " + b.RolloutID + ": " + why)
		}
	}
	if log == nil {
		mem, _, n, err := busRollout(ctx, bus, b.RolloutID)
		if err != nil {
			return err
		}
		v.Read.BusRecords += n
		log = mem
	}
	meta, end, err := headMeta(log)
	if err != nil {
		return err
	}
	v.heads[b.RolloutID] = rollout.Head{Log: log, HistoryBase: meta.HistoryBase, MetaEnd: end}
	return v.readBases(ctx, bus, dir, meta.HistoryBase, depth+1)
}

// mirrorPrefix returns a base's mirror file when it holds the base's frozen
// prefix, else why not.
func mirrorPrefix(dir string, b *rollout.HistoryPosition) (rollout.Log, string) {
	path := datadir.MirrorPath(dir, b.RolloutID)
	if path == "" {
		return nil, "no mirror file"
	}
	f, err := rollout.OpenFile(path)
	if err != nil {
		return nil, err.Error()
	}
	j, err := rollout.NewJoined(f.Name(), rollout.Segment{Log: f, From: 0, To: b.EndByteOffset})
	if err != nil {
		return nil, err.Error()
	}
	cur, err := j.Backward()
	if err != nil {
		return nil, err.Error()
	}
	defer cur.Close()
	e, err := cur.Next()
	switch {
	case err != nil:
		return nil, fmt.Sprintf("mirror file %s: %v", path, err)
	case e.End() != b.EndByteOffset || e.Ordinal != b.EndOrdinalExclusive-1:
		return nil, fmt.Sprintf("mirror file %s does not hold the prefix up to ordinal %d (offset %d)", path, b.EndOrdinalExclusive, b.EndByteOffset)
	}
	return f, ""
}

// readCurrent reads the current rollout: from its mirror file and the bus
// past it, or from the bus alone.
func (v *View) readCurrent(ctx context.Context, bus *stream.Bus, dir string) error {
	if dir != "" {
		why, err := v.fromMirror(ctx, bus, dir)
		if err != nil || why == "" {
			return err
		}
		v.Read.fallback(why)
		v.own, v.Read.MirrorOrdinal = nil, 0
	}
	mem, known, n, err := busRollout(ctx, bus, v.Current)
	if err != nil {
		return err
	}
	v.own = []rollout.Segment{{Log: mem, From: 0, To: int64(len(mem.Bytes()))}}
	v.Known = known
	v.Read.BusRecords += n
	return nil
}

// fromMirror takes the current rollout's mirror file up to its last whole
// record and reads the bus past it. why says why the mirror cannot be used
// ("" when it was); err is a failure of the bus.
func (v *View) fromMirror(ctx context.Context, bus *stream.Bus, dir string) (why string, err error) {
	path := datadir.MirrorPath(dir, v.Current)
	if path == "" {
		return "no mirror file of rollout " + v.Current, nil
	}
	f, err := rollout.OpenFile(path)
	if err != nil {
		return err.Error(), nil
	}
	last, why := lastWhole(f)
	if why != "" {
		return why, nil
	}
	tail, err := bus.TailAt(ctx, v.Current, last.Ordinal, last.Raw)
	if errors.Is(err, stream.ErrNoTailAt) {
		return fmt.Sprintf("mirror file %s: %v", path, err), nil
	}
	if err != nil {
		return "", err
	}
	v.own = []rollout.Segment{{Log: f, From: 0, To: last.End()}}
	v.Read.MirrorOrdinal = last.Ordinal
	v.Known = stream.KnownTail{Tail: tail, Last: last.Record.Clone(), LastSeq: tail.Seq}
	_, err = v.readSuffix(ctx, bus)
	return "", err
}

// lastWhole finds a mirror file's last whole record; a torn last line (an
// append in progress, a write cut short) is passed over.
func lastWhole(f *rollout.File) (rollout.Entry, string) {
	cur, err := f.Backward()
	if err != nil {
		return rollout.Entry{}, err.Error()
	}
	defer cur.Close()
	for {
		e, err := cur.Next()
		var ce *rollout.CorruptionError
		switch {
		case errors.As(err, &ce) && ce.Torn():
			continue
		case errors.Is(err, io.EOF):
			return e, "mirror file " + f.Name() + " holds no record"
		case err != nil:
			return e, fmt.Sprintf("mirror file %s is damaged at its tail: %v", f.Name(), err)
		case e.Ordinal < 1:
			return e, "mirror file " + f.Name() + ": its last record has no ordinal"
		}
		return e, ""
	}
}

// readSuffix reads what the bus accepted past v.Known into a new segment of
// the current rollout, and returns how many records it read.
func (v *View) readSuffix(ctx context.Context, bus *stream.Bus) (int64, error) {
	var data []byte
	var n int64
	var lastLine []byte
	tail, lastSeq, err := bus.ValidPacksFrom(ctx, v.Current, v.Known.Tail, func(p *stream.Packed) error {
		for _, l := range p.Lines {
			data = append(append(data, l...), '\n')
		}
		n += int64(len(p.Lines))
		lastLine = p.Lines[len(p.Lines)-1]
		return nil
	})
	if err != nil {
		return 0, err
	}
	v.Known.Tail, v.Known.LastSeq = tail, lastSeq
	if n == 0 {
		return 0, nil
	}
	rec, err := rollout.DecodeLine(lastLine)
	if err != nil {
		return 0, err
	}
	v.Known.Last = rec.Clone()
	mem := rollout.NewMem("bus:"+stream.RolloutSubject(v.Current), data)
	v.own = append(v.own, rollout.Segment{Log: mem, From: 0, To: int64(len(data))})
	v.Read.BusRecords += n
	return n, nil
}

// Extend reads what the bus accepted on the current rollout since the view
// was read (what a resume just appended) and adds it to the view; it
// returns how many records were added.
func (v *View) Extend(ctx context.Context, bus *stream.Bus) (int64, error) {
	gets := bus.RolloutGets()
	defer func() { v.Read.BusGets += bus.RolloutGets() - gets }()
	n, err := v.readSuffix(ctx, bus)
	if err != nil || n == 0 {
		return n, err
	}
	return n, v.build()
}

// ownLog is the current rollout's own records as one log.
func (v *View) ownLog() (rollout.Log, error) {
	if len(v.own) == 1 {
		if m, ok := v.own[0].Log.(*rollout.Mem); ok {
			return m, nil
		}
	}
	return rollout.NewJoined(v.own[0].Log.Name(), v.own...)
}

// build lays out the view from the current rollout's log and its bases.
func (v *View) build() error {
	own, err := v.ownLog()
	if err != nil {
		return err
	}
	log, err := rollout.OpenView(v.Current, func(id string) (rollout.Head, error) {
		if id == v.Current {
			return rollout.Head{Log: own, HistoryBase: v.Meta.HistoryBase, MetaEnd: v.meta}, nil
		}
		h, ok := v.heads[id]
		if !ok {
			return rollout.Head{}, fmt.Errorf("rollout %s is not here", id)
		}
		return h, nil
	})
	if err != nil {
		return err
	}
	v.Log = log
	return nil
}

// busRollout reads a whole rollout from the bus by the valid-tail rule
// (junk skipped), lines exactly as stored, with its valid tail and the
// number of records.
func busRollout(ctx context.Context, bus *stream.Bus, id string) (*rollout.Mem, stream.KnownTail, int64, error) {
	var data, lastLine []byte
	var n int64
	tail, lastSeq, err := bus.ValidPacks(ctx, id, func(p *stream.Packed) error {
		for _, l := range p.Lines {
			data = append(append(data, l...), '\n')
		}
		n += int64(len(p.Lines))
		lastLine = p.Lines[len(p.Lines)-1]
		return nil
	})
	if err != nil {
		return nil, stream.KnownTail{}, 0, err
	}
	known := stream.KnownTail{Tail: tail, LastSeq: lastSeq}
	if lastLine != nil {
		rec, err := rollout.DecodeLine(lastLine)
		if err != nil {
			return nil, known, 0, err
		}
		known.Last = rec.Clone()
	}
	return rollout.NewMem("bus:"+stream.RolloutSubject(id), data), known, n, nil
}

// headMeta reads a log's canonical (first) session_meta and where it ends.
func headMeta(log rollout.Log) (rollout.SessionMeta, int64, error) {
	cur, err := log.Forward(0)
	if err != nil {
		return rollout.SessionMeta{}, 0, err
	}
	defer cur.Close()
	var meta rollout.SessionMeta
	end := int64(-1)
	err = rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		if e.Type != rollout.TypeSessionMeta {
			return true, nil
		}
		m, err := rollout.Decode[rollout.SessionMeta](&e.Record)
		if err == nil {
			err = m.Validate()
		}
		if err != nil {
			return false, fmt.Errorf("%s line %d: %w", log.Name(), e.Line, err)
		}
		meta, end = m, e.End()
		return false, nil
	})
	if err != nil {
		return meta, 0, err
	}
	if end < 0 {
		return meta, 0, fmt.Errorf("%s: %w", log.Name(), rollout.ErrNoSessionMeta)
	}
	return meta, end, nil
}
