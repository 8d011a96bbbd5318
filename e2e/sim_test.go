package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// simWriter writes one rollout through the real writer, in bursts with a
// flush after each, going idle now and then (closing its writer, so the
// mirror compresses the rollout, and reopening it later, so the mirror
// re-materializes it). It remembers every line it appended.
type simWriter struct {
	id    string
	meta  rollout.SessionMeta
	idle  bool // goes idle now and then
	rng   *rand.Rand
	mu    sync.Mutex
	lines map[int64][]byte // ordinal -> line with '\n'; lines never stored are dropped on reopen
	acked int64            // highest ordinal ever acknowledged
	lost  []string         // acknowledged records a reopen did not find on the bus
	reops int
}

func newSimWriter(id string, seed int64, idle bool, base *rollout.HistoryPosition) *simWriter {
	return &simWriter{id: id, idle: idle, rng: rand.New(rand.NewSource(seed)), lines: map[int64][]byte{},
		meta: rollout.SessionMeta{ID: id, RolloutID: id, Source: rollout.Source{Kind: "sim"}, Cwd: "/e2e",
			HistoryMode: rollout.HistoryPaginated, HistoryBase: base, SchemaVersion: rollout.Version}}
}

// run writes until stop is closed, then flushes everything (retrying while
// the coordinator is down) and closes.
func (s *simWriter) run(ctx context.Context, bus *stream.Bus, stop <-chan struct{}) error {
	var w *stream.Writer
	var l *stream.Lease
	closeW := func() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if w != nil {
			_ = w.Close(cctx)
			if a := w.Acked(); a > 0 {
				s.setAcked(a)
			}
		}
		if l != nil {
			_ = l.Release(cctx)
		}
		w, l = nil, nil
	}
	defer closeW()
	open := func() error {
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var err error
			octx, cancel := context.WithTimeout(ctx, 2*time.Second)
			l, err = bus.TakeLease(octx, s.id, stream.LeaseOptions{Holder: "e2e", Force: true})
			if err == nil {
				w, err = bus.OpenWriter(octx, l, s.id, stream.WriterOptions{PublishTimeout: time.Second, BackoffMax: 100 * time.Millisecond})
			}
			cancel()
			if err == nil {
				break
			}
			if l != nil {
				_ = l.Release(context.Background())
				l = nil
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		s.reopened(w.Next())
		if w.Next() == 1 {
			return s.add(ctx, w, rollout.New(time.Now(), 0, rollout.TypeSessionMeta, rollout.MustJSON(s.meta)))
		}
		return nil
	}
	if err := open(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return s.finish(ctx, w)
		default:
		}
		if err := w.Err(); err != nil && !errors.Is(err, stream.ErrPublishFailing) {
			closeW() // fenced or lease lost: take the lease again
			if err := open(); err != nil {
				return err
			}
		}
		burst := 1 + s.rng.Intn(12)
		for i := 0; i < burst; i++ {
			text := fmt.Sprintf("%s burst %d item %d %s", s.id, n, i, strings.Repeat("x", 150))
			if err := s.add(ctx, w, rollout.New(time.Now(), 0, rollout.TypeResponseItem, rollout.MessageItem("assistant", text))); err != nil {
				break // the writer stopped: reopened above
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := w.Flush(fctx)
		cancel()
		if err == nil {
			s.setAcked(w.Acked())
		}
		pause := time.Duration(s.rng.Intn(20)) * time.Millisecond
		if err == nil && s.idle && s.rng.Intn(25) == 0 {
			closeW()
			pause = time.Duration(500+s.rng.Intn(500)) * time.Millisecond // long enough to be compressed
		}
		select {
		case <-stop:
		case <-time.After(pause):
		}
		if w == nil {
			if err := open(); err != nil {
				return err
			}
		}
	}
}

func (s *simWriter) add(ctx context.Context, w *stream.Writer, r rollout.Record) error {
	ord, err := w.Append(ctx, r)
	if err != nil {
		return err
	}
	r.Ordinal, r.CRC = ord, rollout.Checksum(r.Payload)
	s.mu.Lock()
	s.lines[ord] = r.Encode()
	s.mu.Unlock()
	return nil
}

func (s *simWriter) setAcked(a int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = max(s.acked, a)
}

// reopened drops the lines a new writer will reuse: they never reached the
// bus. An acknowledged one among them would be a lost record.
func (s *simWriter) reopened(next int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reops++
	if s.acked >= next {
		s.lost = append(s.lost, fmt.Sprintf("rollout %s: ordinals %d-%d acknowledged, the bus ends at %d", s.id, next, s.acked, next-1))
	}
	for ord := range s.lines {
		if ord >= next {
			delete(s.lines, ord)
		}
	}
}

// finish flushes until everything is acknowledged, then closes.
func (s *simWriter) finish(ctx context.Context, w *stream.Writer) error {
	for {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := w.Flush(fctx)
		cancel()
		if err == nil {
			s.setAcked(w.Acked())
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("rollout %s: final flush: %w", s.id, err)
		}
		if !errors.Is(err, stream.ErrPublishFailing) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("rollout %s: final flush: %w", s.id, err)
		}
	}
}

// snapshot returns the lines 1..n and the acknowledged ordinal.
func (s *simWriter) snapshot() (map[int64][]byte, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64][]byte, len(s.lines))
	for k, v := range s.lines {
		out[k] = v
	}
	return out, s.acked
}
