package rollout

import (
	"fmt"
	"testing"
)

// The persistence policy, tested both ways (DESIGN §3): what must never be
// persisted is Transient, what Logbook reads is Canonical, an unknown kind is
// kept, and records other than event_msg are always kept.

// transientKinds are Codex's event kinds of every class DESIGN §3 says is
// never persisted.
var transientKinds = map[string][]string{
	"every *_delta": {"agent_message_delta", "agent_reasoning_delta", "agent_reasoning_raw_content_delta",
		"exec_command_output_delta", "agent_message_content_delta", "reasoning_content_delta",
		"reasoning_raw_content_delta", "plan_delta", "some_future_delta"},
	"every *_begin": {"exec_command_begin", "mcp_tool_call_begin", "patch_apply_begin", "web_search_begin",
		"collab_agent_spawn_begin", "some_future_begin"},
	"item_started":                {"item_started"},
	"approval requests":           {"exec_approval_request", "apply_patch_approval_request", "elicitation_request", "request_user_input"},
	"warnings":                    {"warning"},
	"stream errors":               {"stream_error"},
	"MCP start-up progress":       {"mcp_startup_update", "mcp_startup_complete"},
	"session-configured notices":  {"session_configured"},
	"other live-only (the table)": {"background_event", "agent_reasoning_section_break"},
}

// canonicalKinds are the kinds Logbook reads, and the Codex kinds it keeps.
var canonicalKinds = []string{
	EventTaskStarted, EventTaskComplete, EventTurnAborted, EventThreadRolledBack, EventTokenCount,
	EventUserMessage, EventAgentMessage, EventThreadSpawned, EventInterAgentSent, EventInterAgentReceived,
	EventReconciled, EventRolloutSealed,
	"agent_reasoning", "agent_reasoning_raw_content", "context_compacted", "entered_review_mode",
	"exited_review_mode", "undo_completed",
}

func eventRecord(kind string) Record {
	return New(goldenClock()(), 1, TypeEventMsg, MustJSON(map[string]string{"type": kind}))
}

func TestPolicyTransient(t *testing.T) {
	for class, kinds := range transientKinds {
		for _, k := range kinds {
			r := eventRecord(k)
			if EventPolicy(k) != Transient || Persist(&r) {
				t.Errorf("%s: %s is %v, Persist %v; want transient, dropped", class, k, EventPolicy(k), Persist(&r))
			}
		}
	}
}

func TestPolicyCanonical(t *testing.T) {
	kinds := append([]string{"future_kind", "turn_diff", "plan_update", ""}, canonicalKinds...)
	for _, k := range kinds {
		r := eventRecord(k)
		if EventPolicy(k) != Canonical || !Persist(&r) {
			t.Errorf("%q is %v, Persist %v; want canonical, kept", k, EventPolicy(k), Persist(&r))
		}
	}
	// Every event kind of the golden rollouts and the real sessions is kept:
	// Codex itself persisted them.
	for _, path := range validFiles(t) {
		for _, s := range forward(t, openFile(t, path), 0) {
			r, _ := DecodeLine([]byte(s.Raw))
			if !Persist(&r) {
				t.Errorf("%s line %d: %s/%s would be dropped", path, s.Line, r.Type, r.EventKind())
			}
		}
	}
}

// TestPolicyOtherRecords: only event_msg records are subject to the policy,
// whatever their payload says.
func TestPolicyOtherRecords(t *testing.T) {
	for _, typ := range []string{TypeSessionMeta, TypeTurnContext, TypeWorldState, TypeResponseItem, TypeCompacted, "future_type"} {
		for _, kind := range []string{"agent_message_delta", "exec_command_begin", "warning"} {
			r := New(goldenClock()(), 1, typ, []byte(fmt.Sprintf(`{"type":%q}`, kind)))
			if !Persist(&r) {
				t.Errorf("%s with payload type %s is dropped", typ, kind)
			}
		}
	}
	// An event_msg without a readable kind is kept rather than guessed at.
	for _, payload := range []string{`{}`, `{"type":7}`, `{"kind":"warning"}`} {
		r := New(goldenClock()(), 1, TypeEventMsg, []byte(payload))
		if !Persist(&r) {
			t.Errorf("event_msg %s is dropped", payload)
		}
	}
	if Canonical.String() != "canonical" || Transient.String() != "transient" {
		t.Errorf("String: %s %s", Canonical, Transient)
	}
}
