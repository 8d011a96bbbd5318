package rollout

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// joinedFixture builds a parent rollout, and a child that references the
// parent's first k records: its own session_meta, then its own records.
func joinedFixture(t *testing.T, k int) (parent *Mem, childOwn *Mem, metaEnd, baseEnd int64, want []byte) {
	t.Helper()
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	pb := &Builder{Now: func() time.Time { return t0 }}
	precs := []Record{pb.Meta(SessionMeta{ID: "P", Cwd: "/"}), pb.TaskStarted("t1"), pb.UserMessage("hi"), pb.Message("user", "hi"),
		pb.Message("assistant", "hello"), pb.TaskComplete("t1"), pb.TaskStarted("t2"), pb.UserMessage("more")}
	parent = MemOf("parent", precs)
	lines := bytes.SplitAfter(parent.Bytes(), []byte("\n"))
	for _, l := range lines[:k] {
		baseEnd += int64(len(l))
	}
	cb := &Builder{Now: func() time.Time { return t0 }}
	crecs := []Record{cb.Meta(SessionMeta{ID: "C", ForkedFromID: "P", Cwd: "/", HistoryBase: &HistoryPosition{RolloutID: "P", EndOrdinalExclusive: int64(k + 1), EndByteOffset: baseEnd}}),
		cb.TaskStarted("c1"), cb.UserMessage("fork"), cb.Message("assistant", "ok")}
	childOwn = MemOf("child", crecs)
	metaEnd = int64(bytes.IndexByte(childOwn.Bytes(), '\n') + 1)
	want = append(append(append([]byte{}, childOwn.Bytes()[:metaEnd]...), parent.Bytes()[:baseEnd]...), childOwn.Bytes()[metaEnd:]...)
	return
}

func readAll(t *testing.T, c Cursor) (recs []Entry, damage []*CorruptionError) {
	t.Helper()
	defer c.Close()
	for {
		e, err := c.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			damage = append(damage, ce)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, e)
	}
}

// TestJoinedIsTheConcatenation: a joined log reads like its segments laid
// end to end, both ways and from every line start, without the ordinal
// damage a real concatenation would show.
func TestJoinedIsTheConcatenation(t *testing.T) {
	for k := 1; k <= 8; k++ {
		parent, child, metaEnd, baseEnd, want := joinedFixture(t, k)
		j, err := NewJoined("joined", Segment{child, 0, metaEnd}, Segment{parent, 0, baseEnd}, Segment{child, metaEnd, -1})
		if err != nil {
			t.Fatal(err)
		}
		wantLines := bytes.SplitAfter(want, []byte("\n"))
		wantLines = wantLines[:len(wantLines)-1]
		c, _ := j.Forward(0)
		fwd, dmg := readAll(t, c)
		if len(dmg) > 0 {
			t.Fatalf("k=%d: forward damage %v", k, dmg)
		}
		if len(fwd) != len(wantLines) {
			t.Fatalf("k=%d: %d records, want %d", k, len(fwd), len(wantLines))
		}
		var off int64
		for i, e := range fwd {
			if e.Offset != off || !bytes.Equal(append(e.Raw, '\n'), wantLines[i]) {
				t.Fatalf("k=%d record %d: offset %d raw %s, want offset %d raw %s", k, i, e.Offset, e.Raw, off, wantLines[i])
			}
			off += int64(len(wantLines[i]))
		}
		b, _ := j.Backward()
		bwd, dmg := readAll(t, b)
		if len(dmg) > 0 || len(bwd) != len(fwd) {
			t.Fatalf("k=%d: backward %d records, damage %v", k, len(bwd), dmg)
		}
		for i := range bwd {
			if bwd[i].Offset != fwd[len(fwd)-1-i].Offset {
				t.Fatalf("k=%d: backward record %d at offset %d, want %d", k, i, bwd[i].Offset, fwd[len(fwd)-1-i].Offset)
			}
		}
		for i, e := range fwd {
			c, err := j.Forward(e.Offset)
			if err != nil {
				t.Fatal(err)
			}
			rest, _ := readAll(t, c)
			if len(rest) != len(fwd)-i || rest[0].Offset != e.Offset {
				t.Fatalf("k=%d: Forward(%d) gave %d records", k, e.Offset, len(rest))
			}
		}
		lines, err := j.LineNumbers([]int64{fwd[len(fwd)-1].Offset})
		if err != nil || lines[fwd[len(fwd)-1].Offset] != len(fwd) {
			t.Fatalf("k=%d: LineNumbers %v %v", k, lines, err)
		}
		// Every line start, and every subset, numbered as in the concatenation.
		var all []int64
		for _, e := range fwd {
			all = append(all, e.Offset)
		}
		cat, err := NewMem("cat", want).LineNumbers(all)
		if err != nil {
			t.Fatal(err)
		}
		for i := range all {
			for _, ask := range [][]int64{all, all[i:], {all[i]}} {
				got, err := j.LineNumbers(ask)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range ask {
					if got[o] != cat[o] {
						t.Fatalf("k=%d: line of offset %d is %d, the concatenation says %d", k, o, got[o], cat[o])
					}
				}
			}
		}
	}
}
