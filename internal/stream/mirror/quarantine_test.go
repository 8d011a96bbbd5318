package mirror

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestQuarantine publishes, with a plain NATS client, messages the mirror
// must refuse. Each lands in quarantine/ with its kind, raw bytes and
// headers, is counted, and reaches neither a mirror file nor the index;
// valid messages around them are mirrored.
func TestQuarantine(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, true)
	good := e.openWriter("good", nil)
	good.items(3, "first")
	// "gapped" holds ordinals 1-2, mirrored normally.
	e.publish(packMsg("rollout.gapped", 1, 1, metaLine("gapped", "gapped", nil), itemLine(2, "two")))

	badCRCRecord := itemLine(2, "tampered")
	badCRCRecord = bytes.Replace(badCRCRecord, []byte("tampered"), []byte("tampereD"), 1)
	wrongCRCPack := packMsg("rollout.crcpack", 1, 1, metaLine("crcpack", "crcpack", nil))
	wrongCRCPack.Header.Set(stream.HeaderCRC, "00000000")
	badIDRecord := line(1, rollout.TypeSessionMeta, []byte(`{"id":"a b","rollout_id":"badid","source":"sim","cwd":"/"}`))
	junk := nats.NewMsg("rollout.junk")
	junk.Data = []byte("\x00\x01 this is not a pack \xff")
	cases := []struct {
		name string
		msg  *nats.Msg
		kind string
		id   string // the rollout the subject names
	}{
		{"junk bytes", junk, KindBadPack, "junk"},
		{"wrong-subject record", packMsg("rollout.victim", 1, 1, metaLine("other", "other", nil)), KindWrongRollout, "victim"},
		{"bad id in the subject", packMsg("rollout.bad.id", 1, 1, metaLine("x", "x", nil)), KindInvalidID, ""},
		{"bad id in a record", packMsg("rollout.badid", 1, 1, badIDRecord), KindInvalidID, "badid"},
		{"pack crc mismatch", wrongCRCPack, KindCRCMismatch, "crcpack"},
		{"record crc mismatch", packMsg("rollout.crcrec", 1, 1, metaLine("crcrec", "crcrec", nil), badCRCRecord), KindCRCMismatch, "crcrec"},
		{"ordinal gap", packMsg("rollout.gapped", 4, 1, itemLine(4, "four")), KindOrdinalGap, ""},
		{"ordinal conflict", packMsg("rollout.gapped", 2, 2, itemLine(2, "two, rewritten")), KindOrdinalConflict, ""},
		{"line with another ordinal", packMsg("rollout.gapped", 3, 1, itemLine(5, "five")), KindBadRecord, ""},
	}
	seqs := make([]uint64, len(cases))
	for i, c := range cases {
		seqs[i] = e.publish(c.msg)
	}
	good.items(3, "after")
	// A valid continuation of "gapped" after all that is mirrored.
	e.publish(packMsg("rollout.gapped", 3, 3, itemLine(3, "three"))) // epoch 3: a msg id of its own
	e.caughtUp(r)

	st := r.m.Status()
	if st.Quarantined != uint64(len(cases)) || st.QuarantineFiles != len(cases) {
		t.Fatalf("status %+v: want %d quarantined", st, len(cases))
	}
	qs, err := ReadQuarantine(e.dir)
	if err != nil || len(qs) != len(cases) {
		t.Fatalf("quarantine: %d entries (%v)", len(qs), err)
	}
	for i, c := range cases {
		q := qs[i]
		if q.Seq != seqs[i] || q.Kind != c.kind || q.Subject != c.msg.Subject || q.Reason == "" {
			t.Errorf("%s: quarantined as %+v, want seq %d kind %s", c.name, q, seqs[i], c.kind)
			continue
		}
		raw, err := os.ReadFile(filepath.Join(e.dir, datadir.Quarantine, strconv.FormatUint(q.Seq, 10)+".msg"))
		if err != nil || !bytes.Equal(raw, c.msg.Data) {
			t.Errorf("%s: %s.msg does not hold the message's bytes (%v)", c.name, strconv.FormatUint(q.Seq, 10), err)
		}
		if c.msg.Header.Get(stream.HeaderCRC) != "" && q.Headers[stream.HeaderCRC][0] != c.msg.Header.Get(stream.HeaderCRC) {
			t.Errorf("%s: headers not kept: %v", c.name, q.Headers)
		}
		if st.QuarantinedByKind[c.kind] == 0 {
			t.Errorf("%s: kind %s not counted: %v", c.name, c.kind, st.QuarantinedByKind)
		}
		t.Logf("%-26s -> %s: %s", c.name, q.Kind, q.Reason)
		if c.id != "" {
			if p := datadir.MirrorPath(e.dir, c.id); p != "" {
				t.Errorf("%s: a mirror file %s exists", c.name, p)
			}
		}
	}
	ents, _ := os.ReadDir(datadir.RolloutsDir(e.dir))
	if len(ents) != 2 {
		var names []string
		for _, x := range ents {
			names = append(names, x.Name())
		}
		t.Fatalf("rollouts/ holds %v, want good.jsonl and gapped.jsonl only", names)
	}
	e.checkEqual("good")
	gapped, _ := readFile(t, e.dir, "gapped")
	want := string(metaLine("gapped", "gapped", nil)) + "\n" + string(itemLine(2, "two")) + "\n" + string(itemLine(3, "three")) + "\n"
	if gapped != want {
		t.Fatalf("gapped holds\n%s\nwant\n%s", gapped, want)
	}
	ctx := ctxT(t, 10*time.Second)
	waitFor(t, 10*time.Second, "the index", func() bool {
		ro, _, err := r.ix.Rollout(ctx, "gapped")
		g, _, err2 := r.ix.Rollout(ctx, "good")
		return err == nil && err2 == nil && ro.WatermarkOrdinal == 3 && g.WatermarkOrdinal == 7
	})
	ros, err := r.ix.Rollouts(ctx)
	if err != nil || len(ros) != 2 {
		t.Fatalf("index holds %d rollouts (%v), want good and gapped only", len(ros), err)
	}
}

// TestDamagedMirrorFile: damage at a mirror file's tail that is not a torn
// write is not repaired by guessing: the file is set aside in
// quarantine/damaged/ with its reason and the rollout rebuilt from the bus;
// nothing is quarantined.
func TestDamagedMirrorFile(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{}, false)
	e.publish(packMsg("rollout.dmg", 1, 1, metaLine("dmg", "dmg", nil), itemLine(2, "two")))
	e.caughtUp(r)
	r.stop()
	path := e.plain("dmg")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Replace(b, []byte(`"two"`), []byte(`"TWO"`), 1) // the crc no longer matches
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	r2 := e.start(Config{}, false)
	e.publish(packMsg("rollout.dmg", 3, 1, itemLine(3, "three")))
	e.caughtUp(r2)
	if qs, err := ReadQuarantine(e.dir); err != nil || len(qs) != 0 {
		t.Fatalf("quarantine %+v (%v), want none", qs, err)
	}
	e.checkEqual("dmg")
	kept, err := filepath.Glob(filepath.Join(e.dir, datadir.Quarantine, datadir.Damaged, "dmg.jsonl.*"))
	if err != nil || len(kept) != 2 {
		t.Fatalf("set aside: %v (%v), want the file and its reason", kept, err)
	}
	slices.Sort(kept)
	if got, _ := os.ReadFile(kept[0]); !bytes.Equal(got, damaged) {
		t.Fatalf("%s does not hold the damaged file", kept[0])
	}
	if st := r2.m.Status(); st.SetAside != 1 || len(st.Damaged) != 0 {
		t.Fatalf("status %+v", st)
	}
}
