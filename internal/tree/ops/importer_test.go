package ops

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestImportCodexSessions: the six real Codex sessions go onto the bus with
// ordinals and crcs, payloads unchanged; importing again publishes nothing;
// the bus copy replays to the state of the file.
func TestImportCodexSessions(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	dir := "../../../testdata/codex-real"
	calls := 0
	got, err := Import(ctx, bus.Bus, dir, "import-test", func(done, total int) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || calls != 6 {
		t.Fatalf("%d files imported, %d progress calls", len(got), calls)
	}
	for _, im := range got {
		if im.Err != "" || im.Published != im.Records || im.Records == 0 {
			t.Errorf("%s: %+v", filepath.Base(im.Path), im)
		}
		e, err := bus.Threads().Get(ctx, im.Thread)
		if err != nil || string(e.Value()) != im.Rollout {
			t.Errorf("THREADS %s: %v", im.Thread, err)
		}
		file, err := rollout.OpenFile(im.Path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := replay.Naive(file, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		onBus, err := ReadRollout(ctx, bus.Bus, im.Rollout)
		if err != nil {
			t.Fatal(err)
		}
		have, err := replay.Naive(onBus, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Import gives version-0 records ordinals; nothing else may change.
		want.Replay, have.Replay = replay.Stats{}, replay.Stats{}
		for _, st := range []*replay.State{want, have} {
			for i := range st.Turns {
				st.Turns[i].Ordinal = 0
			}
		}
		wj, _ := want.MarshalIndent()
		hj, _ := have.MarshalIndent()
		if string(wj) != string(hj) {
			t.Errorf("%s: the imported rollout replays differently: %s", im.Rollout, firstDiff(string(wj), string(hj)))
		}
	}
	again, err := Import(ctx, bus.Bus, dir, "import-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range again {
		if im.Published != 0 || im.Skipped == "" {
			t.Errorf("re-import of %s published %d records", im.Rollout, im.Published)
		}
	}
}

// TestImportRefusesBadInput: an invalid ID, and a rollout that differs from
// the bus copy, are errors for their file; the others still import.
func TestImportRefusesBadInput(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	b := rollout.Builder{}
	good := rollout.MemOf("good", []rollout.Record{b.Meta(rollout.SessionMeta{ID: "T1", Cwd: "/"}), b.TaskStarted("a"), b.UserMessage("hi")})
	bad := `{"timestamp":"2026-11-29T00:00:00.000Z","type":"session_meta","payload":{"id":"bad.id","cwd":"/","source":"cli"}}` + "\n"
	negative := `{"timestamp":"2026-11-29T00:00:00.000Z","type":"session_meta","payload":{"id":"neg","cwd":"/","source":"cli","schema_version":-5}}` + "\n"
	for name, data := range map[string][]byte{"good.jsonl": good.Bytes(), "bad.jsonl": []byte(bad), "negative.jsonl": []byte(negative)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Import(ctx, bus.Bus, dir, "import-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range got {
		switch filepath.Base(im.Path) {
		case "good.jsonl":
			if im.Err != "" || im.Published != 3 {
				t.Errorf("good: %+v", im)
			}
		case "bad.jsonl":
			if !strings.Contains(im.Err, "session_meta.id") {
				t.Errorf("bad: %+v", im)
			}
		case "negative.jsonl":
			if !strings.Contains(im.Err, "schema_version -5") || im.Published != 0 {
				t.Errorf("schema_version -5 imported: %+v", im)
			}
		}
	}
	// Change the file: the bus copy now differs.
	changed := rollout.MemOf("changed", []rollout.Record{b.Meta(rollout.SessionMeta{ID: "T1", Cwd: "/other"})})
	if err := os.WriteFile(filepath.Join(dir, "good.jsonl"), changed.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ = Import(ctx, bus.Bus, dir, "import-test", nil)
	for _, im := range got {
		if filepath.Base(im.Path) == "good.jsonl" && !strings.Contains(im.Err, "differs at ordinal 1") {
			t.Errorf("a conflicting re-import: %+v", im)
		}
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return "line " + strconv.Itoa(i+1) + ": " + la[i] + " vs " + lb[i]
		}
	}
	return "lengths differ"
}

// A 100,000-deep nested last line is left out as a torn tail, and import
// says so instead of dropping it without a word.
func TestImportSaysTornTail(t *testing.T) {
	bus := newBus(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	b := rollout.Builder{}
	good := rollout.MemOf("deep", []rollout.Record{b.Meta(rollout.SessionMeta{ID: "D1", Cwd: "/"}), b.TaskStarted("a")})
	deep := `{"type":"event_msg","payload":{"type":"x","v":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}}\n"
	if err := os.WriteFile(filepath.Join(dir, "deep.jsonl"), append(good.Bytes(), deep...), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Import(ctx, bus.Bus, dir, "import-test", nil)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if im := got[0]; im.Err != "" || im.Published != 2 || !strings.Contains(im.TornTail, "line 3") || !strings.Contains(im.TornTail, "nested too deeply") {
		t.Errorf("import of a deep last line: %+v", im)
	}
}
