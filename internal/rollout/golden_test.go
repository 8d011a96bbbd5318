package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The golden rollouts under testdata/ are written by the builders below and
// committed; TestGoldenUpToDate keeps the two equal. A changed builder is a
// changed wire format: rerun with -rewrite and review the diff.
//
//	go test ./internal/rollout -run TestGoldenUpToDate -rewrite

const goldenDir = "testdata"

// IDs of the golden rollouts: ULIDs, as Logbook makes them.
const (
	gThread    = "01JDXB3Q8Z4K7M2N5P9R6S1T0V"
	gRollout   = "01JDXB3Q8Z4K7M2N5P9R6S1T0W"
	gSession   = "01JDXB3Q8Z4K7M2N5P9R6S1T0X"
	gParent    = "01JDXB1A2B3C4D5E6F7G8H9J0K"
	gBase      = "01JDXB1A2B3C4D5E6F7G8H9J0M"
	gChild     = "01JDXB5V6W7X8Y9Z0A1B2C3D4E"
	gSuccessor = "01JDXB9N8M7L6K5J4H3G2F1E0D"
	gMsgSent   = "01JDXB7T0R1Q2P3N4M5K6J7H8G"
	gMsgRecv   = "01JDXB7T0R1Q2P3N4M5K6J7H8H"
)

func goldenClock() func() time.Time {
	t := time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC)
	return func() time.Time {
		t = t.Add(1250 * time.Millisecond)
		return t
	}
}

// v1All holds every record type and every event kind of DESIGN §3, in an
// order replay would accept.
func v1All() []Record {
	b := &Builder{Now: goldenClock()}
	window := 2
	open := []OpenCall{{CallID: "call_07", Name: "deploy", IdempotencyKey: "idem-deploy-07", TurnID: "turn_02"}}
	return []Record{
		b.Meta(SessionMeta{ID: gThread, RolloutID: gRollout, SessionID: gSession, ParentThreadID: gParent,
			ForkedFromID: gBase, Source: Source{Kind: "subagent"}, AgentRole: "reviewer", AgentPath: "root/reviewer",
			Cwd: "/work/project", BaseInstructions: []byte(`"You review diffs; <b>never</b> push & merge."`),
			DynamicTools: []byte(`[{"name":"deploy","description":"ship it"}]`), HistoryMode: HistoryLegacy,
			HistoryBase: &HistoryPosition{RolloutID: gBase, EndOrdinalExclusive: 42, EndByteOffset: 18311}}),
		b.TurnContext(TurnContext{TurnID: "turn_01", Model: "gpt-5.3-codex", ApprovalPolicy: "on-request",
			SandboxPolicy: []byte(`{"type":"workspace-write","network_access":false}`), Cwd: "/work/project", Effort: "high"}),
		b.World(true, map[string]any{"branch": "main", "files": map[string]string{"a.go": "v1"}}),
		b.TaskStarted("turn_01"),
		b.UserMessage("Review the change in a.go — and say whether x < y && y > z."),
		b.Message("user", "Review the change in a.go — and say whether x < y && y > z."),
		b.JSON(TypeResponseItem, map[string]any{"type": "reasoning", "summary": []map[string]string{{"type": "summary_text", "text": "Reading a.go first."}}}),
		b.Call("call_01", "shell", `{"command":["cat","a.go"]}`, "idem-cat-01"),
		b.Output("call_01", "package a\n"),
		b.JSON(TypeResponseItem, map[string]any{"type": ItemCustomToolCall, "status": "completed", "call_id": "call_02", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"}),
		b.JSON(TypeResponseItem, map[string]any{"type": ItemCustomToolOutput, "call_id": "call_02", "output": "Done!"}),
		b.JSON(TypeResponseItem, map[string]any{"type": "web_search_call", "status": "completed", "action": map[string]string{"type": "search", "query": "go crc32c"}}),
		b.World(false, map[string]any{"files": map[string]any{"a.go": "v2", "b.go": nil}}),
		b.Event(map[string]string{"type": EventAgentMessage, "message": "a.go is fine."}),
		b.Message("assistant", "a.go is fine."),
		b.TokenCount(1200, 300),
		b.Event(ThreadSpawned{Type: EventThreadSpawned, ChildThreadID: gChild, AgentRole: "tester"}),
		b.Event(InterAgentSent{Type: EventInterAgentSent, MsgID: gMsgSent, IdempotencyKey: "task-tests-1", ToThread: gChild,
			Kind: MsgTask, Body: []byte(`{"text":"run the tests"}`)}),
		b.TaskComplete("turn_01"),
		b.TaskStarted("turn_02"),
		b.Event(InterAgentReceived{Type: EventInterAgentReceived, MsgID: gMsgRecv, IdempotencyKey: "result-tests-1",
			FromThread: gChild, Kind: MsgResult, InReplyTo: gMsgSent}),
		b.TurnAborted("turn_02", AbortInterrupted),
		b.RolledBack(1),
		b.Compacted(Compacted{Message: "Reviewed a.go; tests pass.", ReplacementHistory: []json.RawMessage{
			MessageItem("user", "Review the change in a.go"), MessageItem("assistant", "a.go is fine.")},
			WindowNumber: &window, OpenCalls: &open}),
		b.Event(Reconciled{Type: EventReconciled, CallID: "call_07", Outcome: OutcomeNotExecuted, Evidence: "no deploy with key idem-deploy-07", By: "probe"}),
		b.Event(RolloutSealed{Type: EventRolloutSealed, SuccessorRolloutID: gSuccessor}),
	}
}

// codexShapes is a version-0 child rollout as Codex writes it: no ordinal,
// no crc, the structured subagent source, base_instructions as an object, and
// the parent's session_meta inherited after the child's own.
var codexShapes = []string{
	`{"timestamp":"2026-02-23T12:19:42.561Z","type":"session_meta","payload":{"id":"019c8a70-dda7-7f33-98ea-f30553347399","timestamp":"2026-02-23T12:19:38.535Z","cwd":"/work/project","originator":"Codex Desktop","cli_version":"0.104.0-alpha.1","source":{"subagent":{"thread_spawn":{"parent_thread_id":"019c8a70-dda7-7f33-98ea-f30553347322","depth":1}}},"agent_role":"explorer","model_provider":"openai","base_instructions":{"text":"You are Codex."}}}`,
	`{"timestamp":"2026-02-23T12:19:42.562Z","type":"session_meta","payload":{"id":"019c8a70-dda7-7f33-98ea-f30553347322","timestamp":"2026-02-23T12:10:01.000Z","cwd":"/work/project","originator":"Codex Desktop","cli_version":"0.104.0-alpha.1","source":"vscode","model_provider":"openai","base_instructions":{"text":"You are Codex."}}}`,
	`{"timestamp":"2026-02-23T12:19:42.562Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>"}]}}`,
	`{"timestamp":"2026-02-23T12:19:42.563Z","type":"turn_context","payload":{"turn_id":"019c8a71-0000-7000-8000-000000000001","cwd":"/work/project","approval_policy":"on-request","sandbox_policy":{"type":"workspace-write","writable_roots":["/work/project"],"network_access":false},"model":"gpt-5.3-codex","effort":"high","summary":"auto"}}`,
	`{"timestamp":"2026-02-23T12:19:42.563Z","type":"event_msg","payload":{"type":"task_started","turn_id":"019c8a71-0000-7000-8000-000000000001","model_context_window":258400}}`,
	`{"timestamp":"2026-02-23T12:19:42.564Z","type":"event_msg","payload":{"type":"user_message","message":"Find where x < y && y > z is checked","images":[],"local_images":[],"text_elements":[]}}`,
	`{"timestamp":"2026-02-23T12:19:42.564Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Find where x < y && y > z is checked"}]}}`,
	`{"timestamp":"2026-02-23T12:19:45.100Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Searching**"}],"content":null,"encrypted_content":"gAAAAB"}}`,
	`{"timestamp":"2026-02-23T12:19:45.101Z","type":"event_msg","payload":{"type":"agent_reasoning","text":"**Searching**"}}`,
	`{"timestamp":"2026-02-23T12:19:46.204Z","type":"response_item","payload":{"type":"custom_tool_call","status":"completed","call_id":"call_KH5gIhTdPia26j6m61o8LRiY","name":"apply_patch","input":"*** Begin Patch\n*** Update File: a.go\n@@\n-x\n+y\n*** End Patch\n"}}`,
	`{"timestamp":"2026-02-23T12:19:47.763Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_KH5gIhTdPia26j6m61o8LRiY","output":"{\"output\":\"Success. Updated the following files:\\nM a.go\\n\",\"metadata\":{\"exit_code\":0}}"}}`,
	`{"timestamp":"2026-02-23T12:19:50.839Z","type":"response_item","payload":{"type":"web_search_call","status":"completed","action":{"type":"search","query":"zstd seekable format"}}}`,
	`{"timestamp":"2026-02-23T12:19:51.615Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":0.0,"window_minutes":300,"resets_at":1771864831},"plan_type":null}}}`,
	`{"timestamp":"2026-02-23T12:19:52.001Z","type":"event_msg","payload":{"type":"agent_message","message":"It is checked in a.go\u2014line 3.","phase":"final_answer"}}`,
	`{"timestamp":"2026-02-23T12:19:52.002Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"019c8a71-0000-7000-8000-000000000001","last_agent_message":"It is checked in a.go\u2014line 3."}}`,
}

// unknownShapes is a v1 rollout from a newer writer: an unknown record type,
// an unknown event kind, unknown envelope fields (one before the ordinal, one
// after the crc) and unknown payload fields. All of it must survive.
func unknownShapes() []string {
	meta := `{"id":"` + gThread + `","rollout_id":"` + gRollout + `","source":"sim","cwd":"/w","history_mode":"paginated","schema_version":1,"x_hint":{"a":[1,2,3]}}`
	lines := []struct{ ts, typ, payload, extraBefore, extraAfter string }{
		{"2026-11-29T10:00:01.000Z", TypeSessionMeta, meta, "", ""},
		{"2026-11-29T10:00:02.000Z", "checkpoint_hint", `{"every":100,"why":"<fast> & cheap"}`, `"trace_id":"t-1",`, ""},
		{"2026-11-29T10:00:03.000Z", TypeEventMsg, `{"type":"task_started","turn_id":"turn_01","x_started_by":"cron"}`, "", `,"x_shard":7`},
		{"2026-11-29T10:00:04.000Z", TypeEventMsg, `{"type":"future_kind","detail":{"nested":[true,false,null]}}`, "", ""},
		{"2026-11-29T10:00:05.000Z", TypeResponseItem, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}],"x_phase":"final"}`, `"span":{"id":"s-9"},`, `,"x_after":"\u00e9"`},
		{"2026-11-29T10:00:06.000Z", TypeResponseItem, `{"type":"image_generation_call","result":"iVBORw0KGgo="}`, "", ""},
		{"2026-11-29T10:00:07.000Z", TypeEventMsg, `{"type":"task_complete","turn_id":"turn_01"}`, "", ""},
	}
	var out []string
	for i, l := range lines {
		out = append(out, fmt.Sprintf(`{"timestamp":%q,%s"ordinal":%d,"type":%q,"payload":%s,"crc":%q%s}`,
			l.ts, l.extraBefore, i+1, l.typ, l.payload, Checksum([]byte(l.payload)), l.extraAfter))
	}
	return out
}

// futureVersion is a rollout written by schema version 2: readable here,
// read-only.
func futureVersion() []Record {
	b := &Builder{Now: goldenClock()}
	return []Record{
		b.Record(TypeSessionMeta, []byte(`{"id":"`+gThread+`","rollout_id":"`+gRollout+`","source":"cli","cwd":"/w","history_mode":"legacy","schema_version":2,"x_v2_field":"kept"}`)),
		b.TaskStarted("turn_01"),
		b.UserMessage("hello from the future"),
		b.Record(TypeEventMsg, []byte(`{"type":"task_complete","turn_id":"turn_01","x_v2":1}`)),
	}
}

func encodeAll(recs []Record) []string {
	out := make([]string, len(recs))
	for i := range recs {
		out[i] = string(recs[i].Append(nil))
	}
	return out
}

func join(lines []string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// Positions of the damage in the damaged copies of v1-all (1-based lines).
const (
	dmgCorruptLine = 10 // replaced by its first half
	dmgCRCLine     = 8  // one payload letter changed
	dmgDroppedLine = 12 // removed: ordinal 12 is missing
	dmgDupLine     = 15 // written twice in a row
	dmgNoOrdLine   = 18 // re-encoded without its ordinal
)

// goldenFiles builds every golden rollout by name.
func goldenFiles() map[string][]byte {
	all := encodeAll(v1All())
	n := len(all)
	with := func(f func(lines []string) []string) []byte { return join(f(slices.Clone(all))) }
	files := map[string][]byte{
		"v1-all.jsonl":         join(all),
		"codex-shapes.jsonl":   join(codexShapes),
		"unknown-shapes.jsonl": join(unknownShapes()),
		"future-version.jsonl": join(encodeAll(futureVersion())),
	}
	last := all[n-1]
	files["torn-unterminated.jsonl"] = append(join(all[:n-1]), last[:len(last)/2]...)
	files["torn-unparsable.jsonl"] = with(func(l []string) []string { l[n-1] = last[:len(last)/2]; return l })
	files["corrupt-middle.jsonl"] = with(func(l []string) []string {
		l[dmgCorruptLine-1] = l[dmgCorruptLine-1][:len(l[dmgCorruptLine-1])/2]
		return l
	})
	files["crc-mismatch.jsonl"] = with(func(l []string) []string {
		l[dmgCRCLine-1] = strings.Replace(l[dmgCRCLine-1], `"name":"shell"`, `"name":"shelL"`, 1)
		return l
	})
	files["ordinal-gap.jsonl"] = with(func(l []string) []string { return slices.Delete(l, dmgDroppedLine-1, dmgDroppedLine) })
	files["ordinal-duplicate.jsonl"] = with(func(l []string) []string {
		return slices.Insert(l, dmgDupLine, l[dmgDupLine-1])
	})
	files["missing-ordinal.jsonl"] = with(func(l []string) []string {
		r, err := DecodeLine([]byte(l[dmgNoOrdLine-1]))
		if err != nil {
			panic(err)
		}
		r.Raw, r.Ordinal = nil, 0
		l[dmgNoOrdLine-1] = string(r.Append(nil))
		return l
	})
	return files
}

func TestGoldenUpToDate(t *testing.T) {
	files := goldenFiles()
	readme := string(readFile(t, filepath.Join(goldenDir, "README.md")))
	for name, want := range files {
		path := filepath.Join(goldenDir, name)
		if *rewrite {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/rollout -run TestGoldenUpToDate -rewrite)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its builder; rerun with -rewrite and review the diff", path)
		}
		if !strings.Contains(readme, name) {
			t.Errorf("testdata/README.md does not describe %s", name)
		}
	}
	if *rewrite {
		writeSeedCorpus(t)
	}
}

// goldenPaths lists the committed golden rollouts.
func goldenPaths(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name := range goldenFiles() {
		out[name] = filepath.Join(goldenDir, name)
	}
	return out
}

// validFiles are the golden and real rollouts without damage.
func validFiles(t testing.TB) []string {
	t.Helper()
	paths := codexFiles(t)
	for _, name := range []string{"v1-all.jsonl", "codex-shapes.jsonl", "unknown-shapes.jsonl", "future-version.jsonl"} {
		paths = append(paths, filepath.Join(goldenDir, name))
	}
	return paths
}

// TestV1AllCoversTheFormat proves the claim the golden file makes: every
// record type and every event kind of DESIGN §3.
func TestV1AllCoversTheFormat(t *testing.T) {
	l := openFile(t, filepath.Join(goldenDir, "v1-all.jsonl"))
	seen := map[string]bool{}
	for i, s := range forward(t, l, 0) {
		if s.Kind != nil {
			t.Fatalf("damage in v1-all: %v", s)
		}
		r, err := DecodeLine([]byte(s.Raw))
		if err != nil {
			t.Fatal(err)
		}
		if r.Ordinal != int64(i+1) || r.CRC == "" || !r.CRCOK() {
			t.Fatalf("line %d: ordinal %d crc %q", i+1, r.Ordinal, r.CRC)
		}
		seen[r.Type] = true
		if k := r.EventKind(); k != "" {
			seen[r.Type+"/"+k] = true
		}
		switch r.Type {
		case TypeSessionMeta:
			m, err := Decode[SessionMeta](&r)
			if err != nil || m.HistoryBase == nil || m.HistoryBase.EndOrdinalExclusive != 42 || m.Validate() != nil {
				t.Fatalf("session_meta %+v: %v", m, err)
			}
			seen["history_base"] = true
		case TypeWorldState:
			w, _ := Decode[WorldState](&r)
			seen[fmt.Sprintf("world_state/full=%v", w.Full)] = true
		case TypeCompacted:
			c, _ := Decode[Compacted](&r)
			if len(c.ReplacementHistory) == 2 && c.WindowNumber != nil && c.OpenCalls != nil && len(*c.OpenCalls) == 1 {
				seen["compacted/full"] = true
			}
		}
	}
	want := []string{TypeSessionMeta, "history_base", TypeTurnContext, "world_state/full=true", "world_state/full=false",
		"compacted/full"}
	for _, k := range []string{ItemMessage, "reasoning", ItemFunctionCall, ItemFunctionCallOutput, ItemCustomToolCall,
		ItemCustomToolOutput, "web_search_call"} {
		want = append(want, TypeResponseItem+"/"+k)
	}
	for _, k := range []string{EventTaskStarted, EventTaskComplete, EventTurnAborted, EventThreadRolledBack,
		EventTokenCount, EventUserMessage, EventAgentMessage, EventThreadSpawned, EventInterAgentSent,
		EventInterAgentReceived, EventReconciled, EventRolloutSealed} {
		want = append(want, TypeEventMsg+"/"+k)
	}
	for _, k := range want {
		if !seen[k] {
			t.Errorf("v1-all.jsonl lacks %s", k)
		}
	}
}
