package rollout

import "fmt"

// maxViewDepth bounds a history_base chain: deeper is taken for a cycle.
const maxViewDepth = 64

// Head is what a view needs of one rollout: its log, its canonical
// session_meta's history_base (nil for a plain rollout), and the byte offset
// just past that session_meta.
type Head struct {
	Log         Log
	HistoryBase *HistoryPosition
	MetaEnd     int64
}

// ViewSegments lays out the view of rollout id: a plain rollout is itself; one
// with a history_base (a fork by reference, a revert) is its own
// session_meta, then the view of the base up to end_byte_offset (itself
// resolved the same way), then its own records. head gives each rollout of
// the chain; leaves names the rollout each segment comes from. The one rule
// for every reader of views (the corpus, the index's show).
func ViewSegments(id string, head func(id string) (Head, error)) (segs []Segment, leaves []string, err error) {
	return viewSegments(id, -1, 0, head)
}

func viewSegments(id string, limit int64, depth int, head func(string) (Head, error)) ([]Segment, []string, error) {
	if depth > maxViewDepth {
		return nil, nil, fmt.Errorf("rollout %s: history_base chain deeper than %d (a cycle?)", id, maxViewDepth)
	}
	h, err := head(id)
	if err != nil {
		return nil, nil, err
	}
	b := h.HistoryBase
	if b == nil {
		return []Segment{{Log: h.Log, From: 0, To: limit}}, []string{id}, nil
	}
	base, baseLeaves, err := viewSegments(b.RolloutID, b.EndByteOffset, depth+1, head)
	if err != nil {
		return nil, nil, fmt.Errorf("rollout %s history_base: %w", id, err)
	}
	segs := append([]Segment{{Log: h.Log, From: 0, To: h.MetaEnd}}, base...)
	leaves := append([]string{id}, baseLeaves...)
	if limit < 0 || limit > h.MetaEnd {
		segs = append(segs, Segment{Log: h.Log, From: h.MetaEnd, To: limit})
		leaves = append(leaves, id)
	}
	return segs, leaves, nil
}

// OpenView opens the view of rollout id as one Log: the rollout's own log
// when it has no history_base, else a Joined of the segments.
func OpenView(id string, head func(id string) (Head, error)) (Log, error) {
	segs, _, err := ViewSegments(id, head)
	if err != nil {
		return nil, err
	}
	if len(segs) == 1 && segs[0].From == 0 && segs[0].To < 0 {
		return segs[0].Log, nil
	}
	return NewJoined(segs[0].Log.Name(), segs...)
}

// ReadHead reads what a view needs of log: its canonical (first)
// session_meta's history_base and where that record ends. Damage before it
// is skipped, as replay skips it.
func ReadHead(log Log) (Head, error) {
	cur, err := log.Forward(0)
	if err != nil {
		return Head{}, err
	}
	h := Head{Log: log, MetaEnd: -1}
	err = Scan(cur, nil, func(e Entry) (bool, error) {
		if e.Type != TypeSessionMeta {
			return true, nil
		}
		m, err := Decode[SessionMeta](&e.Record)
		if err == nil {
			err = m.Validate()
		}
		if err != nil {
			return false, fmt.Errorf("%s line %d: %w", log.Name(), e.Line, err)
		}
		h.HistoryBase, h.MetaEnd = m.HistoryBase, e.End()
		return false, nil
	})
	if err != nil {
		return Head{}, err
	}
	if h.MetaEnd < 0 {
		return Head{}, fmt.Errorf("%s: %w", log.Name(), ErrNoSessionMeta)
	}
	return h, nil
}
