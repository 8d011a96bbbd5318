package mirror

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
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

// TestStaleEpochAfterRestart: the highest epoch a rollout's accepted packs
// carried survives the mirror's restart. Writer 1 (epoch > 0) writes, the
// mirror is closed and opened again, then a pack continuing the rollout at
// epoch 0 is published raw: it is quarantined as stale_epoch and the
// mirror file holds exactly writer 1's records.
func TestStaleEpochAfterRestart(t *testing.T) {
	staleAfterRestart(t, func(string) {})
}

// TestStaleEpochJournalMissing: a data dir whose epoch journal is gone
// (or from before it) while the watermark is above 0 has it rebuilt from
// the bus, never taken as empty.
func TestStaleEpochJournalMissing(t *testing.T) {
	staleAfterRestart(t, func(dir string) {
		if err := os.Remove(filepath.Join(dir, datadir.MirrorEpochs)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStaleEpochJournalDamaged: a journal damaged in the middle (a crc
// mismatch) is set aside into quarantine/damaged/ with its reason and
// rebuilt from the bus.
func TestStaleEpochJournalDamaged(t *testing.T) {
	e := staleAfterRestart(t, func(dir string) {
		path := filepath.Join(dir, datadir.MirrorEpochs)
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 20 {
			t.Fatalf("journal: %q (%v)", b, err)
		}
		b[len(b)-3] ^= 1 // inside the JSON of the last, terminated entry
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	reasons, _ := filepath.Glob(filepath.Join(e.dir, datadir.Quarantine, datadir.Damaged, datadir.MirrorEpochs+".*.reason"))
	if len(reasons) != 1 {
		t.Fatalf("set-aside journal reasons: %v, want one", reasons)
	}
	if b, _ := os.ReadFile(reasons[0]); !strings.Contains(string(b), "crc mismatch") {
		t.Fatalf("reason %q does not say crc mismatch", b)
	}
}

// TestEpochJournalTornTail: a journal whose last entry was cut short (a
// crash in its write) loses only that entry.
func TestEpochJournalTornTail(t *testing.T) {
	staleAfterRestart(t, func(dir string) {
		f, err := os.OpenFile(filepath.Join(dir, datadir.MirrorEpochs), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(`1234abcd {"seq":1,"epo`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestEpochJournalPastWatermark: an entry past the watermark (a crash
// between the journal's fsync and the watermark's) is not believed: a
// later writer whose epoch is below the epoch it claims is mirrored, and
// the entry is gone from the journal.
func TestEpochJournalPastWatermark(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	w1 := e.openWriter("victim", nil)
	w1.items(2, "one")
	w1.close()
	e.caughtUp(r)
	r.stop()
	path := filepath.Join(e.dir, datadir.MirrorEpochs)
	line, err := encodeEntry(epochEntry{Seq: 1 << 40, Epochs: map[string]uint64{"victim": 1 << 50}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(line)
	f.Close()

	r = e.start(Config{}, false)
	w2 := e.openWriter("victim", nil)
	w2.items(2, "two")
	w2.close()
	e.caughtUp(r)
	e.checkEqual("victim")
	if qs, err := ReadQuarantine(e.dir); err != nil || len(qs) != 0 {
		t.Fatalf("quarantine: %+v (%v), want nothing", qs, err)
	}
	if b, _ := os.ReadFile(path); bytes.Contains(b, line) {
		t.Fatal("the entry past the watermark is still in the journal")
	}
}

// staleAfterRestart writes a rollout at an epoch above 0, stops the
// mirror, runs between on the stopped data dir, starts the mirror again
// and publishes a pack continuing the rollout at epoch 0: it must be
// quarantined as stale_epoch, the mirror file intact.
func staleAfterRestart(t *testing.T, between func(dir string)) *env {
	e := newEnv(t)
	r := e.start(Config{}, false)
	w1 := e.openWriter("victim", nil)
	w1.items(5, "one")
	if w1.l.Epoch() == 0 {
		t.Fatal("writer 1 holds epoch 0")
	}
	w1.close()
	e.caughtUp(r)
	r.stop()
	between(e.dir)

	r = e.start(Config{}, false)
	// Another rollout's records, mirrored: the mirror has finished its
	// start-up checks (which would read the bus's packs of "victim" if
	// they ran after the stale pack) and is consuming.
	other := e.openWriter("other", nil)
	other.items(1, "x")
	other.close()
	e.caughtUp(r)
	next := int64(len(w1.lines)) + 1
	stale := e.publish(packMsg("rollout.victim", next, 0, itemLine(next, "stale")))
	e.caughtUp(r)
	got, _ := readFile(t, e.dir, "victim")
	var want strings.Builder
	for _, l := range w1.lines {
		want.Write(l)
	}
	if got != want.String() {
		t.Fatalf("mirror holds\n%s\nwant\n%s", got, want.String())
	}
	qs, err := ReadQuarantine(e.dir)
	if err != nil || len(qs) != 1 || qs[0].Kind != KindStaleEpoch || qs[0].Seq != stale {
		t.Fatalf("quarantine: %+v (%v), want stale_epoch at seq %d", qs, err, stale)
	}
	return e
}
