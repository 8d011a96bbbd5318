package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayJSONGolden: replay --json prints replay.State.MarshalIndent of
// the fast path, byte for byte the reviewed golden files of package replay.
func TestReplayJSONGolden(t *testing.T) {
	inputs := map[string]string{}
	for _, name := range []string{"chapter-rollback-1", "chapter-rollback-2", "chapter-rollback-3", "mid-turn-compaction"} {
		inputs[name] = example(name)
	}
	for _, p := range codexFiles(t) {
		base := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		inputs["codex-"+base[len(base)-36:]] = p
	}
	for name, path := range inputs {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(goldenDir, name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			r := runCLI(t, "replay", "--json", path)
			r.wantCode(t, exitOK)
			if r.stdout != string(want) {
				t.Errorf("replay --json %s differs from %s.json", path, name)
			}
			if r.stderr != "" {
				t.Errorf("stderr: %q", r.stderr)
			}
		})
	}
}

// TestReplayNaive: --naive gives the same state by the other path.
func TestReplayNaive(t *testing.T) {
	type doc = map[string]json.RawMessage
	parse := func(s string) doc {
		var d doc
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			t.Fatalf("%v in %s", err, s)
		}
		return d
	}
	path := example("chapter-rollback-3")
	fast := parse(runCLI(t, "replay", "--json", path).stdout)
	r := runCLI(t, "replay", "--json", "--naive", path)
	r.wantCode(t, exitOK)
	naive := parse(r.stdout)
	if !strings.Contains(string(naive["replay"]), `"mode": "naive"`) {
		t.Errorf("replay stats %s, want mode naive", naive["replay"])
	}
	delete(fast, "replay")
	delete(naive, "replay")
	a, _ := json.Marshal(fast)
	b, _ := json.Marshal(naive)
	if string(a) != string(b) {
		t.Errorf("naive state differs from fast:\n%s\n%s", b, a)
	}
}

func TestReplayReport(t *testing.T) {
	r := runCLI(t, "replay", example("mid-turn-compaction"))
	r.wantCode(t, exitOK)
	r.wantOut(t,
		"Replay of "+example("mid-turn-compaction"),
		"thread     thread-M", "rollout    rollout-M", "mode       legacy", "schema     1", "read-only  no",
		"model     model-large", "approval  on-request", "cwd       /repo", "window    3",
		`World state   {"cwd":"/repo","sandbox":"workspace-write","tools":["shell","search"],"environment":"staging"}`,
		"Token usage   total 124,000 (input 93,000, output 31,000); last 19,000",
		"Tokens spent  124,000 (input 93,000, output 31,000)",
		"History: 5 items in effect",
		"0  message/user       找出登录超时的根因",
		"4  function_call      deploy call_id=call-deploy-1 idempotency_key=deploy-staging-1.4.2",
		"investigate  completed    -       yes   2",
		"deploy       interrupted  -       yes   16",
		"Dangling calls: 1 call, outcome unknown — not failed, not pending",
		"call-deploy-1  deploy  deploy-staging-1.4.2  deploy",
		"Warnings: none",
		"Replay: fast, 21 records read, start ordinal 2 (offset 217), 0 corrupt lines, no torn tail",
	)
	if r.stderr != "" {
		t.Errorf("stderr: %q", r.stderr)
	}

	r = runCLI(t, "replay", example("chapter-rollback-2"))
	r.wantCode(t, exitOK)
	r.wantOut(t, "fix-login          completed", "deploy-staging     rolled_back", "deploy-production  rolled_back",
		"History: 2 items in effect", "Dangling calls: none")
}

// TestReplayElision: a long history is cut to its head and tail unless --full.
func TestReplayElision(t *testing.T) {
	var path string
	for _, p := range codexFiles(t) {
		if strings.Contains(p, "019c8a59-e9dd") {
			path = p
		}
	}
	r := runCLI(t, "replay", path)
	r.wantCode(t, exitOK)
	r.wantOut(t, "History: 454 items in effect", "429 items elided (--full shows all)", "453  message/assistant",
		"schema     0 (Codex rollout)", "context window 258,400")
	if strings.Contains(r.stdout, "\n  5    ") {
		t.Error("item 5 is listed without --full")
	}
	full := runCLI(t, "replay", "--full", path)
	full.wantCode(t, exitOK)
	full.wantOut(t, "\n  5    ", "\n  200  ")
	if strings.Contains(full.stdout, "elided") {
		t.Error("--full still elides")
	}
	// Every listed line stays on one line: as many history rows as items.
	if n := strings.Count(full.stdout, "\n  4") - strings.Count(full.stdout, "\n  4 "); n < 50 {
		t.Errorf("found %d rows numbered 4x/4xx", n)
	}
}

func TestReplayModelChanged(t *testing.T) {
	r := runCLI(t, "replay", "--model", "model-small", example("mid-turn-compaction"))
	r.wantCode(t, exitOK)
	r.wantOut(t, "Warnings: 1", "model_changed  -  resuming with model model-small; the last model in effect was model-large")
}

func TestReplayDamage(t *testing.T) {
	chapter := example("chapter-rollback-1")

	torn := damaged(t, chapter, tornTail)
	r := runCLI(t, "replay", torn)
	r.wantCode(t, exitOK)
	r.wantOut(t, "torn tail ignored", atLines(t, torn, "torn_tail  offset {25}  a write cut short: ignored  72 bytes without a final newline"))

	corrupt := damaged(t, chapter, corruptLine(12))
	r = runCLI(t, "replay", "--naive", corrupt)
	r.wantOneLineError(t, corrupt+" line 12", "corrupt line", "--salvage")
	// The fast path, reading backward, names the same line.
	r = runCLI(t, "replay", corrupt)
	r.wantOneLineError(t, "corruption inside the dependency region", corrupt+" line 12 ", "--salvage")
	if r.stdout != "" {
		t.Errorf("a failed replay printed %q", r.stdout)
	}
	for _, mode := range []string{"", "--naive"} {
		args := []string{"replay", "--salvage", corrupt}
		if mode != "" {
			args = append(args, mode)
		}
		r = runCLI(t, args...)
		r.wantCode(t, exitOK)
		r.wantOut(t, "salvaged_corruption  line 12", "corrupt_line  line 12", "inside the dependency region: skipped (--salvage)",
			"1 corrupt line,")
	}
	r.wantOut(t, "Replay: naive,")
	r = runCLI(t, "replay", "--salvage", corrupt)
	r.wantOut(t, "Replay: fast-fallback,")

	crc := damaged(t, chapter, flipPayload(t, 17, "succeeded", "succeedeD"))
	r = runCLI(t, "replay", "--naive", crc)
	r.wantOneLineError(t, crc+" line 17", "ordinal 17", "crc mismatch", "--salvage")
	r = runCLI(t, "replay", "--salvage", "--json", crc)
	r.wantCode(t, exitOK)
	r.wantOut(t, `"code": "salvaged_corruption"`, `"kind": "crc_mismatch"`)
}

func TestReplayCompressed(t *testing.T) {
	zst := compressed(t, example("mid-turn-compaction"))
	want, err := os.ReadFile(filepath.Join(goldenDir, "mid-turn-compaction.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "replay", "--json", zst)
	r.wantCode(t, exitOK)
	if r.stdout != string(want) {
		t.Errorf("replay of %s differs from the golden state of its JSONL:\n%s", zst, r.stdout)
	}
	r = runCLI(t, "replay", zst)
	r.wantCode(t, exitOK)
	r.wantOut(t, "Replay of "+zst, "call-deploy-1")
}

func TestReplayUnusableInput(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	empty := filepath.Join(dir, "empty.jsonl")
	headless := filepath.Join(dir, "headless.jsonl")
	for path, data := range map[string]string{
		notes:    "hello\nthis is not a rollout\n",
		empty:    "",
		headless: `{"timestamp":"2026-11-29T10:00:00.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t"}}` + "\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing.jsonl")
	tests := []struct {
		path  string
		parts []string
	}{
		{missing, []string{missing + ": no such file"}},
		{dir, []string{dir, "is a directory"}},
		{notes, []string{notes + " line 1", "not a rollout"}},
		{empty, []string{empty, "empty file", "not a rollout"}},
		{headless, []string{headless, "no session_meta record", "line 1 is a event_msg record"}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			r := runCLI(t, "replay", tt.path)
			r.wantOneLineError(t, tt.parts...)
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
}
