package tree

import (
	"errors"
	"io"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// tape is a rollout read once from its head: every entry and every error its
// forward cursor gave, in order. Forward(0) plays them back without reading
// or decoding the file again, so the full scan decodes each line once for
// the corpus and for the replay of the rollout's view (the replay reads its
// log from the head three times). Anything else is read from the log.
type tape struct {
	log   rollout.Log
	steps []step
}

type step struct {
	e   rollout.Entry
	err error // a *rollout.CorruptionError, or what ended the read (nil: an entry)
}

// record reads log forward to its end into a tape.
func record(log rollout.Log) (*tape, error) {
	cur, err := log.Forward(0)
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	t := &tape{log: log}
	for {
		e, err := cur.Next()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		var ce *rollout.CorruptionError
		if err != nil && !errors.As(err, &ce) {
			t.steps = append(t.steps, step{err: err}) // the cursor cannot go on
			return t, nil
		}
		t.steps = append(t.steps, step{e: e, err: err})
	}
}

func (t *tape) Name() string { return t.log.Name() }

func (t *tape) Forward(from int64) (rollout.Cursor, error) {
	if from != 0 {
		return t.log.Forward(from)
	}
	return &playback{steps: t.steps}, nil
}

func (t *tape) Backward() (rollout.Cursor, error) { return t.log.Backward() }

func (t *tape) LineNumbers(offsets []int64) (map[int64]int, error) { return t.log.LineNumbers(offsets) }

type playback struct {
	steps []step
	i     int
}

func (p *playback) Next() (rollout.Entry, error) {
	if p.i >= len(p.steps) {
		return rollout.Entry{}, io.EOF
	}
	s := p.steps[p.i]
	p.i++
	var ce *rollout.CorruptionError
	if errors.As(s.err, &ce) {
		c := *ce // each reader may fill in what it learns (a line number)
		return s.e, &c
	}
	if s.err != nil {
		p.i-- // as the cursor, which failed for good
	}
	return s.e, s.err
}

func (p *playback) Close() error { return nil }
