package rollout

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	accepted := []string{
		"01JDXB3Q8Z4K7M2N5P9R6S1T0V",           // ULID
		"019c8a70-dda7-7f33-98ea-f30553347322", // UUID (Codex thread ids)
		"thread_1", "a-b_c", "x", "-", "_",
		strings.Repeat("a", 128),
	}
	for _, id := range accepted {
		if err := ValidateID("thread", id); err != nil {
			t.Errorf("%q refused: %v", id, err)
		}
	}
	refused := []string{
		"", ".", "a.b", "*", "a*", ">", "a>", "/", "a/b", " ", "a b", "a\n", "\na", "a\x00",
		strings.Repeat("a", 129), "é", "thread-é", "日本", "a\u200b",
	}
	for _, id := range refused {
		err := ValidateID("session_meta.id", id)
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("%q accepted (%v)", id, err)
			continue
		}
		if !strings.Contains(err.Error(), "session_meta.id") {
			t.Errorf("error %q does not name the field", err)
		}
		if len(err.Error()) > 200 {
			t.Errorf("error for a %d-byte id is %d bytes long", len(id), len(err.Error()))
		}
	}
}

func TestSessionMetaValidate(t *testing.T) {
	valid := func() SessionMeta {
		return SessionMeta{ID: gThread, RolloutID: gRollout, ParentThreadID: gParent, ForkedFromID: gBase,
			Source: Source{Kind: "subagent", ParentThreadID: gParent}, HistoryMode: HistoryPaginated,
			HistoryBase: &HistoryPosition{RolloutID: gBase}}
	}
	if m := valid(); m.Validate() != nil {
		t.Fatal(m.Validate())
	}
	tests := []struct {
		field string
		edit  func(m *SessionMeta)
	}{
		{"session_meta.id", func(m *SessionMeta) { m.ID = "" }},
		{"session_meta.id", func(m *SessionMeta) { m.ID = "a.b" }},
		{"session_meta.rollout_id", func(m *SessionMeta) { m.RolloutID = "r/1" }},
		{"session_meta.parent_thread_id", func(m *SessionMeta) { m.ParentThreadID = "p*" }},
		{"session_meta.forked_from_id", func(m *SessionMeta) { m.ForkedFromID = "f>" }},
		{"session_meta.source.subagent.thread_spawn.parent_thread_id", func(m *SessionMeta) { m.Source.ParentThreadID = "p q" }},
		{"session_meta.history_base.rollout_id", func(m *SessionMeta) { m.HistoryBase.RolloutID = "" }},
		{"session_meta.history_mode", func(m *SessionMeta) { m.HistoryMode = "tree" }},
	}
	for _, tt := range tests {
		m := valid()
		tt.edit(&m)
		err := m.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: %v", tt.field, err)
		}
		if tt.field != "session_meta.history_mode" && !errors.Is(err, ErrInvalidID) {
			t.Errorf("%s: %v does not wrap ErrInvalidID", tt.field, err)
		}
	}
	// Optional IDs may be absent.
	if err := (&SessionMeta{ID: gThread}).Validate(); err != nil {
		t.Errorf("minimal meta: %v", err)
	}
}

func TestSource(t *testing.T) {
	tests := []struct {
		in     string
		kind   string
		parent string
	}{
		{`"cli"`, "cli", ""},
		{`"vscode"`, "vscode", ""},
		{`{"subagent":{"thread_spawn":{"parent_thread_id":"019c8a70-dda7-7f33-98ea-f30553347322","depth":1}}}`, "subagent", "019c8a70-dda7-7f33-98ea-f30553347322"},
		{`{ "subagent" : { "thread_spawn" : { "depth" : 2 , "parent_thread_id" : "p-1" } } }`, "subagent", "p-1"},
		{`{"subagent":"review"}`, "subagent", ""},
		{`{"subagent":{"other":"x"}}`, "subagent", ""},
		{`{"ide":"vscode","subagent":{"thread_spawn":{"parent_thread_id":"p-2"}}}`, "ide", "p-2"},
		{`{}`, "", ""},
		{`null`, "", ""},
	}
	for _, tt := range tests {
		var s Source
		if err := json.Unmarshal([]byte(tt.in), &s); err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if s.Kind != tt.kind || s.ParentThreadID != tt.parent {
			t.Errorf("%s: kind %q parent %q", tt.in, s.Kind, s.ParentThreadID)
		}
		out, err := s.MarshalJSON()
		if err != nil || string(out) != tt.in {
			t.Errorf("%s: MarshalJSON = %s, %v; want the bytes as read", tt.in, out, err)
		}
		m := SessionMeta{ID: "child", Source: s}
		if m.Parent() != tt.parent {
			t.Errorf("%s: Parent() = %q", tt.in, m.Parent())
		}
	}
	for _, bad := range []string{`7`, `true`, `["cli"]`, `{"subagent":}`} {
		var s Source
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s accepted as a source", bad)
		}
	}
	// Built in code, a source is its kind as a string.
	if out, _ := marshalSource(Source{Kind: "sim"}); out != `"sim"` {
		t.Errorf("built source = %s", out)
	}
	// parent_thread_id wins over the source object.
	m := SessionMeta{ParentThreadID: "p-a", Source: Source{ParentThreadID: "p-b"}}
	if m.Parent() != "p-a" {
		t.Errorf("Parent() = %s", m.Parent())
	}
}

// marshalSource marshals a source as a session_meta would.
func marshalSource(s Source) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

func TestSessionMetaDefaults(t *testing.T) {
	codex := SessionMeta{ID: "019c8a70-dda7-7f33-98ea-f30553347322"}
	if codex.Rollout() != codex.ID || codex.Mode() != HistoryLegacy {
		t.Errorf("codex: rollout %s mode %s", codex.Rollout(), codex.Mode())
	}
	m := SessionMeta{ID: gThread, RolloutID: gRollout, HistoryMode: HistoryPaginated}
	if m.Rollout() != gRollout || m.Mode() != HistoryPaginated {
		t.Errorf("v1: rollout %s mode %s", m.Rollout(), m.Mode())
	}
}

// TestCodexShapes reads the version-0 golden: the first session_meta names
// the child and its parent through the source object; the inherited parent
// session_meta after it decodes too but names another thread (replay keeps
// the first: identity never changes).
func TestCodexShapes(t *testing.T) {
	l := openFile(t, filepath.Join(goldenDir, "codex-shapes.jsonl"))
	var metas []SessionMeta
	kinds := map[string]bool{}
	for _, s := range forward(t, l, 0) {
		r, err := DecodeLine([]byte(s.Raw))
		if err != nil || r.Ordinal != 0 || r.CRC != "" {
			t.Fatalf("line %d: %v ordinal %d crc %q", s.Line, err, r.Ordinal, r.CRC)
		}
		kinds[r.EventKind()] = true
		if r.Type == TypeSessionMeta {
			m, err := Decode[SessionMeta](&r)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			metas = append(metas, m)
		}
	}
	if len(metas) != 2 {
		t.Fatalf("%d session_meta records", len(metas))
	}
	child, parent := metas[0], metas[1]
	if child.ID != "019c8a70-dda7-7f33-98ea-f30553347399" || child.Source.Kind != "subagent" || child.Parent() != parent.ID ||
		child.SchemaVersion != 0 || child.AgentRole != "explorer" || child.Rollout() != child.ID {
		t.Errorf("child meta: %+v", child)
	}
	if string(child.BaseInstructions) != `{"text":"You are Codex."}` {
		t.Errorf("base_instructions = %s", child.BaseInstructions)
	}
	if parent.Parent() != "" || parent.Source.Kind != "vscode" {
		t.Errorf("parent meta: %+v", parent)
	}
	for _, k := range []string{ItemCustomToolCall, ItemCustomToolOutput, "web_search_call", "reasoning", EventTaskStarted, EventTaskComplete} {
		if !kinds[k] {
			t.Errorf("codex-shapes.jsonl lacks %s", k)
		}
	}
}

// TestFutureVersion: a rollout of a newer schema version reads like any
// other; its session_meta says it is newer than this reader.
func TestFutureVersion(t *testing.T) {
	l := openFile(t, filepath.Join(goldenDir, "future-version.jsonl"))
	steps := forward(t, l, 0)
	if len(damage(steps)) != 0 || len(steps) != 4 {
		t.Fatalf("steps %v", steps)
	}
	diffSteps(t, "backward", backward(t, l), reversed(steps))
	r, _ := DecodeLine([]byte(steps[0].Raw))
	m, err := Decode[SessionMeta](&r)
	if err != nil || m.SchemaVersion != 2 || m.SchemaVersion <= Version || m.Validate() != nil {
		t.Errorf("meta %+v, %v", m, err)
	}
	if !strings.Contains(string(r.Payload), `"x_v2_field":"kept"`) {
		t.Error("unknown session_meta field lost")
	}
}

func TestResponseItem(t *testing.T) {
	r := Record{Type: TypeResponseItem, Payload: []byte(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"},{"type":"image"},{"type":"output_text","text":"b"}]}`)}
	it, err := Decode[ResponseItem](&r)
	if err != nil || it.Text() != "a\nb" || it.Role != "assistant" {
		t.Errorf("%+v %v %q", it, err, it.Text())
	}
	if _, err := Decode[ResponseItem](&Record{Type: TypeResponseItem, Payload: []byte(`{"type":7}`)}); err == nil || !strings.Contains(err.Error(), TypeResponseItem) {
		t.Errorf("Decode error %v does not name the record type", err)
	}
	for typ, want := range map[string][2]bool{
		ItemFunctionCall: {true, false}, ItemCustomToolCall: {true, false},
		ItemFunctionCallOutput: {false, true}, ItemCustomToolOutput: {false, true},
		ItemMessage: {false, false}, "web_search_call": {false, false},
	} {
		if IsCall(typ) != want[0] || IsCallOutput(typ) != want[1] {
			t.Errorf("%s: IsCall %v IsCallOutput %v", typ, IsCall(typ), IsCallOutput(typ))
		}
	}
	if (&Record{Type: TypeTurnContext, Payload: []byte(`{"type":"x"}`)}).EventKind() != "" {
		t.Error("EventKind of a turn_context")
	}
}

// TestBuilder: consecutive ordinals from 1, checksums, the clock it is given.
func TestBuilder(t *testing.T) {
	recs := v1All()
	for i, r := range recs {
		if r.Ordinal != int64(i+1) || !r.CRCOK() || r.CRC == "" || r.Raw != nil {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if recs[0].Timestamp != "2026-11-29T10:00:01.373Z" {
		t.Errorf("timestamp %s", recs[0].Timestamp)
	}
	if !strings.Contains(string(recs[0].Payload), `"schema_version":1`) {
		t.Error("Meta does not default schema_version to Version")
	}
	b := &Builder{Next: 41}
	if r := b.TaskStarted("t"); r.Ordinal != 41 || b.Next != 42 || r.Timestamp == "" {
		t.Errorf("builder from 41: %+v", r)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustJSON of a channel does not panic")
		}
	}()
	MustJSON(make(chan int))
}
