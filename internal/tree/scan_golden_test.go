package tree

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/tree/treegen"
)

var updateScan = flag.Bool("update-scan", false, "rewrite testdata/scan.golden.json from the current LoadDir and Build")

// richCorpus writes a directory that exercises everything the full scan
// judges: a generated tree with unreceived results, real Codex sessions, the
// examples, and scenes of bad input and of every delivery state (rollbacks,
// reverts, forks by copy and by reference, re-sends, duplicate receipts).
func richCorpus(t *testing.T) string {
	s := newScene(t)
	if _, err := treegen.Write(filepath.Join(s.dir, "gen"), treegen.Config{Seed: 5, Fanout: 3, Depth: 2, Turns: 3, Unreceived: 0.3}); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"../../testdata/codex-real", "../../testdata/examples"} {
		copyTree(t, src, filepath.Join(s.dir, filepath.Base(src)))
	}
	const task, result = rollout.MsgTask, rollout.MsgResult
	// Bad input.
	s.thread("O", "rO", rollout.SessionMeta{ParentThreadID: "Nowhere"}).turn("o1").done("o1").write()
	s.thread("X", "rX", rollout.SessionMeta{ParentThreadID: "Y"}).write()
	s.thread("Y", "rY", rollout.SessionMeta{ParentThreadID: "X"}).write()
	s.thread("D", "rD1", rollout.SessionMeta{}).turn("d1").done("d1").write()
	s.thread("D", "rD2", rollout.SessionMeta{}).turn("d2").done("d2").turn("d3").done("d3").write()
	s.thread("S", "rS1", rollout.SessionMeta{}).turn("s1").done("s1").sealed("rS-missing").write()
	s.thread("G", "rG", rollout.SessionMeta{ForkedFromID: "P", HistoryBase: &rollout.HistoryPosition{RolloutID: "rGone", EndOrdinalExclusive: 3, EndByteOffset: 400}}).
		turn("g1").done("g1").write()
	bad := s.thread("B", "rB", rollout.SessionMeta{}).turn("b1").send("m-bad", "kb", "no/such", task, "").done("b1")
	bad.write()
	if err := os.WriteFile(filepath.Join(s.dir, "dup-of-rB.jsonl"), bad.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "junk.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nometa := s.thread("N", "rN", rollout.SessionMeta{}).turn("n1").bytes()
	if err := os.WriteFile(filepath.Join(s.dir, "nometa.jsonl"), nometa[bytes.IndexByte(nometa, '\n')+1:], 0o644); err != nil {
		t.Fatal(err)
	}
	// Damage: a corrupt line, an ordinal gap and a torn tail in a thread
	// that received a task; a compressed rollout.
	dm := s.thread("DM", "rDM", rollout.SessionMeta{ParentThreadID: "P"}).turn("dm1").recv("m7", "k7", "P", task, "").done("dm1").turn("dm2")
	lines := bytes.SplitAfter(dm.bytes(), []byte("\n"))
	var damaged []byte
	for i, l := range lines {
		switch i {
		case 2:
			damaged = append(damaged, []byte("{\"timestamp\": broken\n")...)
		case 5:
			// left out: an ordinal gap
		default:
			damaged = append(damaged, l...)
		}
	}
	damaged = append(damaged, []byte(`{"timestamp":"2026-11-29T09:00:00.000Z","ord`)...)
	if err := os.WriteFile(filepath.Join(s.dir, "rDM.jsonl"), damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	z := s.thread("Z", "rZ", rollout.SessionMeta{ParentThreadID: "P"}).turn("z1").recv("m8", "k8", "P", task, "").done("z1")
	var zb bytes.Buffer
	if err := rollout.WriteZst(&zb, bytes.NewReader(z.bytes())); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "rZ.jsonl.zst"), zb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// A parent P and its children: every delivery state.
	p := s.thread("P", "rP", rollout.SessionMeta{}).turn("p1").
		spawn("C1").send("m1", "k1", "C1", task, "").
		spawn("C2").send("m2", "k2", "C2", task, "").send("m2", "k2", "C2", task, ""). // re-sent
		spawn("C3").send("m3", "k3", "C3", task, "").
		spawn("C4").send("m4", "k4", "C4", task, "").
		spawn("C5").send("m5", "k5", "C5", task, "").send("m5b", "k5", "C5", task, "").
		spawn("Never").send("m6", "k6", "Never", task, "").
		spawn("DM").send("m7", "k7", "DM", task, "").spawn("Z").send("m8", "k8", "Z", task, "").done("p1")
	p.turn("p2").recv("r1", "kr1", "C1", result, "m1").recv("r2", "kr2", "C2", result, "m2").recv("r2", "kr2", "C2", result, "m2").
		recv("r-orphan", "kro", "C3", result, "m3").done("p2").write()
	c1 := s.thread("C1", "rC1", rollout.SessionMeta{ParentThreadID: "P"}).turn("c1").recv("m1", "k1", "P", task, "").
		send("r1", "kr1", "P", result, "m1").done("c1").write()
	s.forkCopy("F1", "rF1", c1, len(c1.recs)).turn("f1").done("f1").write()
	s.forkRef("F2", "rF2", c1, len(c1.recs)).turn("f2").recv("m1", "k1", "P", task, "").done("f2").write()
	s.thread("C2", "rC2", rollout.SessionMeta{ParentThreadID: "P"}).turn("c2").recv("m2", "k2", "P", task, "").done("c2").
		turn("c2b").recv("m2", "k2", "P", task, "").send("r2", "kr2", "P", result, "m2").done("c2b").write()
	s.thread("C3", "rC3", rollout.SessionMeta{ParentThreadID: "P"}).turn("c3").recv("m3", "k3", "P", task, "").done("c3").rollback(1).write()
	c4 := s.thread("C4", "rC4a", rollout.SessionMeta{ParentThreadID: "P", HistoryMode: rollout.HistoryPaginated}).
		turn("c4").done("c4").turn("c4b").recv("m4", "k4", "P", task, "").done("c4b")
	s.revert(c4, "rC4b", len(c4.recs)-3).turn("c4c").send("r4", "kr4", "P", result, "m4").done("c4c").write()
	c4.write()
	c5 := s.thread("C5", "rC5", rollout.SessionMeta{ParentThreadID: "Q"}).turn("c5").recv("m5", "k5", "P", task, "").recv("m5b", "k5", "P", task, "")
	c5.add(c5.b.TurnAborted("c5", "interrupted")).turn("c5b")
	c5.add(c5.b.Call("call-1", "shell", "{}", "")).write()
	return s.dir
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// scanJSON is everything the full scan answers, as JSON, with dir written
// as DIR.
func scanJSON(t *testing.T, dir string, c *Corpus, tr *Tree) []byte {
	t.Helper()
	type threadJSON struct {
		ID, Current  string
		Rollouts     []string
		Err          string
		HistoryItems int
		State        *replay.State // History left out (HistoryItems counts it)
	}
	var threads []threadJSON
	for _, id := range sortedKeys(tr.Threads) {
		th := tr.Threads[id]
		j := threadJSON{ID: id, Current: th.Current.ID, Rollouts: th.Rollouts}
		if th.Err != nil {
			j.Err = th.Err.Error()
		}
		if th.State != nil {
			st := *th.State
			j.HistoryItems, st.History = len(st.History), nil
			j.State = &st
		}
		threads = append(threads, j)
	}
	out, err := json.MarshalIndent(struct {
		Tree         *Tree                `json:"tree"`
		Deliveries   []dedupe.Delivery    `json:"deliveries"`
		ChildResults []dedupe.ChildResult `json:"child_results"`
		Warnings     []string             `json:"warnings"`
		Threads      []threadJSON         `json:"threads"`
	}{tr, tr.Deliveries, tr.ChildResults, c.Warnings, threads}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(out, []byte(dir), []byte("DIR"))
}

// TestFullScanAnswersAsBefore: LoadDir and Build on the rich corpus answer
// byte for byte what the serial full scan answered before it used every
// core (testdata/scan.golden.json, written by that code with -update-scan).
func TestFullScanAnswersAsBefore(t *testing.T) {
	dir := richCorpus(t)
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := scanJSON(t, dir, c, Build(c, Options{Active: func(th string) bool { return strings.HasPrefix(th, "C1") }}))
	golden := filepath.Join("testdata", "scan.golden.json")
	if *updateScan {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := range min(len(gl), len(wl)) {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Fatalf("the full scan answers differently from %s at line %d:\n got %s\nwant %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("the full scan answers %d lines, %s has %d", len(gl), golden, len(wl))
	}
}

// TestFullScanIsTheSameOnOneCoreAndMany: the answer does not depend on how
// many files are read and replayed at once.
func TestFullScanIsTheSameOnOneCoreAndMany(t *testing.T) {
	dir := richCorpus(t)
	if _, err := treegen.Write(filepath.Join(dir, "big"), treegen.Config{Seed: 8, Fanout: 6, Depth: 3, Turns: 2, Unreceived: 0.1}); err != nil {
		t.Fatal(err)
	}
	defer func(f func() int) { scanWorkers = f }(scanWorkers)
	var answers [][]byte
	for _, n := range []int{1, 3, 16} {
		scanWorkers = func() int { return n }
		c, err := LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, scanJSON(t, dir, c, Build(c, Options{})))
	}
	for i, a := range answers[1:] {
		if !bytes.Equal(a, answers[0]) {
			t.Fatalf("the full scan on %d workers differs from the one on 1", []int{3, 16}[i])
		}
	}
}
