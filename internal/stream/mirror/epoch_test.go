package mirror

import (
	"math"
	"strings"
	"testing"
)

// TestStalePackDoesNotSplitRollout is issue 8 item 1: writer 1 acknowledged
// ordinals 1-6; a forged pack for ordinal 4 with epoch 0 is published raw;
// writer 2 (a later lease) must find its tail by the valid-tail rule, not
// from the last message, and continue at 7. The mirror holds exactly writer
// 1's records then writer 2's; the forged pack is quarantined, and a pack
// with an epoch below the rollout's highest is quarantined as stale_epoch.
func TestStalePackDoesNotSplitRollout(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, true)
	w1 := e.openWriter("victim", nil)
	w1.items(5, "one")
	lines := w1.lines
	if w1.l.Epoch() == 0 {
		t.Fatal("writer 1 holds epoch 0")
	}
	e.publish(packMsg("rollout.victim", 4, 0, itemLine(4, "forged")))
	w1.close()

	w2 := e.openWriter("victim", nil)
	if got := w2.w.Next(); got != 7 {
		t.Fatalf("writer 2 continues at ordinal %d, want 7 (after writer 1's acknowledged 6)", got)
	}
	w2.items(3, "two")
	w2.close()
	// A stale pack continuing the rollout, at an epoch below writer 2's.
	stale := e.publish(packMsg("rollout.victim", 10, 0, itemLine(10, "stale")))
	e.caughtUp(r)

	got, _ := readFile(t, e.dir, "victim")
	var want strings.Builder
	for _, l := range append(lines, w2.lines[len(lines):]...) {
		want.Write(l)
	}
	if got != want.String() {
		t.Fatalf("mirror holds\n%s\nwant\n%s", got, want.String())
	}
	qs, err := ReadQuarantine(e.dir)
	if err != nil || len(qs) != 2 {
		t.Fatalf("quarantine: %+v (%v), want the forged and the stale pack", qs, err)
	}
	if qs[0].Kind != KindOrdinalConflict || qs[1].Kind != KindStaleEpoch || qs[1].Seq != stale {
		t.Fatalf("quarantined %+v, want ordinal_conflict then stale_epoch at seq %d", qs, stale)
	}
}

// TestFutureEpochCannotFence: one pack with epoch 2^64-1 (above any lease
// revision issued) is quarantined as future_epoch, and the thread's next
// writer is not fenced by it.
func TestFutureEpochCannotFence(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, true)
	w1 := e.openWriter("target", nil)
	w1.items(2, "one")
	w1.close()
	forged := e.publish(packMsg("rollout.target", 4, math.MaxUint64, itemLine(4, "forged")))
	w2 := e.openWriter("target", nil)
	if got := w2.w.Next(); got != 4 {
		t.Fatalf("writer 2 continues at ordinal %d, want 4", got)
	}
	w2.items(2, "two")
	e.caughtUp(r)
	got, _ := readFile(t, e.dir, "target")
	var want strings.Builder
	for _, l := range append(w1.lines, w2.lines[len(w1.lines):]...) {
		want.Write(l)
	}
	if got != want.String() {
		t.Fatalf("mirror holds\n%s\nwant\n%s", got, want.String())
	}
	qs, err := ReadQuarantine(e.dir)
	if err != nil || len(qs) != 1 || qs[0].Kind != KindFutureEpoch || qs[0].Seq != forged {
		t.Fatalf("quarantine: %+v (%v), want future_epoch at seq %d", qs, err, forged)
	}
}

// TestOverLimitRecordQuarantined: a record one byte over the record limit
// the writers enforce, in a pack the server takes, is quarantined as
// too_large, and the next writer does not continue after it.
func TestOverLimitRecordQuarantined(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, true)
	w1 := e.openWriter("big", nil)
	w1.items(2, "one")
	w1.close()
	limit := e.bus.RecordLimit()
	text := strings.Repeat("x", limit)
	rec := itemLine(4, text)
	for len(rec)+1 > limit+1 { // trim to exactly limit+1 bytes with its '\n'
		text = text[:len(text)-(len(rec)+1-(limit+1))]
		rec = itemLine(4, text)
	}
	if len(rec)+1 != limit+1 {
		t.Fatalf("record is %d bytes, want %d", len(rec)+1, limit+1)
	}
	big := e.publish(packMsg("rollout.big", 4, 1, rec))
	w2 := e.openWriter("big", nil)
	if got := w2.w.Next(); got != 4 {
		t.Fatalf("writer 2 continues at ordinal %d, want 4 (the over-limit record is not its tail)", got)
	}
	w2.items(1, "two")
	e.caughtUp(r)
	qs, err := ReadQuarantine(e.dir)
	if err != nil || len(qs) != 1 || qs[0].Kind != KindTooLarge || qs[0].Seq != big {
		t.Fatalf("quarantine: %+v (%v), want too_large at seq %d", qs, err, big)
	}
	got, _ := readFile(t, e.dir, "big")
	if strings.Contains(got, text[:1000]) {
		t.Fatal("the over-limit record is in the mirror file")
	}
}
