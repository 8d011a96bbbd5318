package stream

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// packedRollout writes a rollout of n records, one pack per record (each
// flushed alone), and returns the lease and every accepted pack's tail with
// its last line, in order.
func packedRollout(t *testing.T, bus *Bus, th string, n int) (*Lease, []Tail, [][]byte) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	l := take(t, bus, th, "test", false)
	w := openWriter(t, bus, l, th, WriterOptions{})
	recs := []rollout.Record{meta(th, th), userMsg("hi")}
	for len(recs) < n {
		recs = append(recs, item("x", 200))
	}
	for _, r := range recs {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var tails []Tail
	var lines [][]byte
	if _, _, err := bus.ValidPacks(ctx, th, func(p *Packed) error {
		tails = append(tails, Tail{Seq: p.Seq, Ordinal: p.Last, Epoch: p.Epoch})
		lines = append(lines, append([]byte(nil), p.Lines[len(p.Lines)-1]...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return l, tails, lines
}

// TestTailAtAndValidPacksFrom: TailAt finds the pack a copy ends with (one
// get when it is the bus's last), and ValidPacksFrom that tail reads only
// the messages past it and ends where the whole read ends. A copy that ends
// inside a pack, differs from the bus, or is ahead of it is ErrNoTailAt.
func TestTailAtAndValidPacksFrom(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 60*time.Second)
	// Another rollout interleaved, so sequences and ordinals differ.
	other, _, _ := packedRollout(t, bus, "other", 3)
	_ = other
	l, tails, lines := packedRollout(t, bus, "ro1", 40)
	// A junk pack past the end: skipped by every read.
	junk := (&pack{rollout: "ro1", first: 3, last: 3, epoch: 0, data: expectLine(item("stale", 100), 3)}).msg()
	if _, err := bus.js.PublishMsg(ctx, junk); err != nil {
		t.Fatal(err)
	}
	whole, wholeLast, err := bus.ValidPacks(ctx, "ro1", func(*Packed) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range tails {
		before := bus.RolloutGets()
		got, err := bus.TailAt(ctx, "ro1", want.Ordinal, lines[i])
		if err != nil {
			t.Fatalf("ordinal %d: %v", want.Ordinal, err)
		}
		if got != want {
			t.Fatalf("ordinal %d: tail %+v, want %+v", want.Ordinal, got, want)
		}
		if gets := bus.RolloutGets() - before; gets > 12 {
			t.Errorf("ordinal %d: %d gets to find the pack, want a binary search", want.Ordinal, gets)
		}
		before = bus.RolloutGets()
		n := 0
		tail, last, err := bus.ValidPacksFrom(ctx, "ro1", got, func(p *Packed) error {
			n++
			if p.First != want.Ordinal+int64(n) {
				t.Fatalf("from ordinal %d: pack %d starts at %d", want.Ordinal, n, p.First)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if tail != whole || last != wholeLast || n != len(tails)-1-i {
			t.Fatalf("from ordinal %d: tail %+v last %d, %d packs; want %+v %d %d", want.Ordinal, tail, last, n, whole, wholeLast, len(tails)-1-i)
		}
		// Every message after the tail is read, the junk one included, and nothing before it.
		if gets := bus.RolloutGets() - before; gets != int64(n)+2 {
			t.Errorf("from ordinal %d: %d gets for %d packs and the junk, want %d", want.Ordinal, gets, n, n+2)
		}
	}
	// The bus's last valid pack is not the subject's last message here (the
	// junk is); without the junk, TailAt at the end is one get.
	l2, tails2, lines2 := packedRollout(t, bus, "ro2", 5)
	_ = l2
	before := bus.RolloutGets()
	if _, err := bus.TailAt(ctx, "ro2", tails2[len(tails2)-1].Ordinal, lines2[len(lines2)-1]); err != nil {
		t.Fatal(err)
	}
	if gets := bus.RolloutGets() - before; gets != 1 {
		t.Errorf("TailAt at the bus's last ordinal took %d gets, want 1", gets)
	}

	for name, c := range map[string]struct {
		ord  int64
		line []byte
	}{
		"ahead of the bus":  {tails[len(tails)-1].Ordinal + 5, lines[len(lines)-1]},
		"a different line":  {tails[10].Ordinal, lines[11]},
		"the empty rollout": {0, nil},
	} {
		if _, err := bus.TailAt(ctx, "ro1", c.ord, c.line); !errors.Is(err, ErrNoTailAt) {
			t.Errorf("%s: %v, want ErrNoTailAt", name, err)
		}
	}
	if _, err := bus.TailAt(ctx, "nothing-here", 3, lines[2]); !errors.Is(err, ErrNoTailAt) {
		t.Errorf("a rollout the bus does not hold: %v, want ErrNoTailAt", err)
	}
	// A pack of two records: its first ordinal is no pack's end.
	w := openWriter(t, bus, l, "ro1", WriterOptions{})
	a, b := item("a", 100), item("b", 100)
	if _, err := w.Append(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mid := whole.Ordinal + 1
	var midLine []byte
	if _, _, err := bus.ValidPacks(ctx, "ro1", func(p *Packed) error {
		if p.First == mid && p.Last == mid+1 {
			midLine = p.Lines[0]
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if midLine == nil {
		t.Skip("the writer did not pack the two records together")
	}
	if _, err := bus.TailAt(ctx, "ro1", mid, midLine); !errors.Is(err, ErrNoTailAt) {
		t.Errorf("an ordinal inside a pack: %v, want ErrNoTailAt", err)
	}
}

// TestOpenWriterAt: a writer opened at a known tail continues after it
// without reading the rollout; junk stored since is skipped (the publish
// expects the subject's new last sequence); a valid pack stored since is
// ErrTailMoved; a tail of a newer epoch is fenced; a sealed one refused.
func TestOpenWriterAt(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 60*time.Second)
	l, tails, lines := packedRollout(t, bus, "ro1", 30)
	last := tails[len(tails)-1]
	rec, err := rollout.DecodeLine(lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	known := KnownTail{Tail: last, Last: rec, LastSeq: last.Seq}

	before := bus.RolloutGets()
	w, err := bus.OpenWriterAt(ctx, l, "ro1", known, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gets := bus.RolloutGets() - before; gets != 1 {
		t.Errorf("OpenWriterAt took %d gets, want 1 (the subject's last message)", gets)
	}
	if w.Next() != last.Ordinal+1 {
		t.Fatalf("next ordinal %d, want %d", w.Next(), last.Ordinal+1)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Junk past the tail: skipped, and the publish expects its sequence.
	junk := (&pack{rollout: "ro1", first: 2, last: 2, epoch: 0, data: expectLine(item("stale", 100), 2)}).msg()
	pub := func(m *nats.Msg) {
		t.Helper()
		if _, err := bus.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	pub(junk)
	w, err = bus.OpenWriterAt(ctx, l, "ro1", known, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ord, err := w.Append(ctx, item("after junk", 100))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("append after junk: %v", err)
	}
	if ord != last.Ordinal+1 {
		t.Errorf("appended at %d, want %d", ord, last.Ordinal+1)
	}
	vt, _, _, err := bus.ValidTail(ctx, "ro1")
	if err != nil {
		t.Fatal(err)
	}
	if vt.Ordinal != ord || vt.Epoch != l.Epoch() {
		t.Errorf("valid tail %+v after the append at %d", vt, ord)
	}

	// The old known tail is now stale: an accepted record follows it.
	if _, err := bus.OpenWriterAt(ctx, l, "ro1", known, WriterOptions{}); !errors.Is(err, ErrTailMoved) {
		t.Errorf("stale known tail: %v, want ErrTailMoved", err)
	}

	// A known tail of a newer epoch than the lease: fenced, as OpenWriter.
	newer := known
	newer.Tail.Epoch = l.Epoch() + 1
	newer.LastSeq = 0
	cur, _, lastSeq, err := bus.ValidTail(ctx, "ro1")
	if err != nil {
		t.Fatal(err)
	}
	newer.Tail, newer.LastSeq = cur, lastSeq
	newer.Tail.Epoch = l.Epoch() + 1
	var fe *FencedError
	if _, err := bus.OpenWriterAt(ctx, l, "ro1", newer, WriterOptions{}); !errors.As(err, &fe) {
		t.Errorf("a tail of a newer epoch: %v, want a FencedError", err)
	}

	// A sealed tail is refused.
	sealed := newer
	sealed.Tail.Epoch = l.Epoch()
	sealed.Last = event(rollout.RolloutSealed{Type: rollout.EventRolloutSealed, SuccessorRolloutID: "ro9"})
	if _, err := bus.OpenWriterAt(ctx, l, "ro1", sealed, WriterOptions{}); !errors.Is(err, ErrSealed) {
		t.Errorf("a sealed tail: %v, want ErrSealed", err)
	}
}
