package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// History modes of a thread (session_meta.history_mode).
const (
	HistoryLegacy    = "legacy"    // rollback by marker
	HistoryPaginated = "paginated" // revert by a new rollout and a pointer switch
)

// SessionMeta is the payload of a session_meta record.
type SessionMeta struct {
	ID               string           `json:"id"`
	RolloutID        string           `json:"rollout_id,omitempty"`
	SessionID        string           `json:"session_id,omitempty"`
	ParentThreadID   string           `json:"parent_thread_id,omitempty"`
	ForkedFromID     string           `json:"forked_from_id,omitempty"`
	Source           Source           `json:"source"`
	AgentRole        string           `json:"agent_role,omitempty"`
	AgentPath        string           `json:"agent_path,omitempty"`
	Cwd              string           `json:"cwd"`
	BaseInstructions json.RawMessage  `json:"base_instructions,omitempty"`
	DynamicTools     json.RawMessage  `json:"dynamic_tools,omitempty"`
	HistoryMode      string           `json:"history_mode,omitempty"`
	HistoryBase      *HistoryPosition `json:"history_base,omitempty"`
	// ForkCopy (a Logbook extension) marks a fork by copy: this rollout's
	// records 2 .. EndOrdinalExclusive are copies of the named rollout's
	// records 1 .. EndOrdinalExclusive-1, payload bytes unchanged. They are
	// that rollout's facts, counted once, for it.
	ForkCopy      *HistoryPosition `json:"fork_copy,omitempty"`
	SchemaVersion int              `json:"schema_version,omitempty"`
}

// HistoryPosition is a frozen position in another rollout: the prefix a
// reference fork or a revert shares.
type HistoryPosition struct {
	RolloutID           string `json:"rollout_id"`
	EndOrdinalExclusive int64  `json:"end_ordinal_exclusive"`
	EndByteOffset       int64  `json:"end_byte_offset"`
}

// Rollout returns the rollout id: rollout_id, or the thread id for Codex
// rollouts (one rollout per thread there).
func (m *SessionMeta) Rollout() string {
	if m.RolloutID != "" {
		return m.RolloutID
	}
	return m.ID
}

// Parent returns the parent thread id from either form: parent_thread_id, or
// Codex's source.subagent.thread_spawn.parent_thread_id.
func (m *SessionMeta) Parent() string {
	if m.ParentThreadID != "" {
		return m.ParentThreadID
	}
	return m.Source.ParentThreadID
}

// Mode returns history_mode with its default (legacy).
func (m *SessionMeta) Mode() string {
	if m.HistoryMode == "" {
		return HistoryLegacy
	}
	return m.HistoryMode
}

// Validate checks the IDs that become subject tokens and file names.
func (m *SessionMeta) Validate() error {
	if err := ValidateID("session_meta.id", m.ID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{
		{"session_meta.rollout_id", m.RolloutID},
		{"session_meta.parent_thread_id", m.ParentThreadID},
		{"session_meta.forked_from_id", m.ForkedFromID},
		{"session_meta.source.subagent.thread_spawn.parent_thread_id", m.Source.ParentThreadID},
	} {
		if f.v != "" {
			if err := ValidateID(f.name, f.v); err != nil {
				return err
			}
		}
	}
	if m.HistoryBase != nil {
		if err := ValidateID("session_meta.history_base.rollout_id", m.HistoryBase.RolloutID); err != nil {
			return err
		}
	}
	if m.ForkCopy != nil {
		if err := ValidateID("session_meta.fork_copy.rollout_id", m.ForkCopy.RolloutID); err != nil {
			return err
		}
	}
	if m.SchemaVersion < 0 {
		return fmt.Errorf("rollout: session_meta.schema_version %d is negative (0 and up)", m.SchemaVersion)
	}
	switch m.HistoryMode {
	case "", HistoryLegacy, HistoryPaginated:
	default:
		return fmt.Errorf("rollout: session_meta.history_mode %q is neither legacy nor paginated", m.HistoryMode)
	}
	return nil
}

// Source is session_meta.source: a string such as "cli" or "subagent", or
// Codex's object form {"subagent":{"thread_spawn":{"parent_thread_id":...}}}.
// The bytes as written are kept.
type Source struct {
	Kind           string // the string, or the object's first key
	ParentThreadID string // from the object form, when present
	Raw            json.RawMessage
}

// UnmarshalJSON accepts both forms.
func (s *Source) UnmarshalJSON(b []byte) error {
	s.Raw = bytes.Clone(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &s.Kind)
	case len(b) > 0 && b[0] == '{':
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			return err
		}
		_ = eachMember(b, func(k, _ []byte) error {
			s.Kind, _ = rawString(k)
			return errStop
		})
		var sub struct {
			ThreadSpawn *struct {
				ParentThreadID string `json:"parent_thread_id"`
			} `json:"thread_spawn"`
		}
		if raw, ok := obj["subagent"]; ok && len(raw) > 0 && raw[0] == '{' {
			if err := json.Unmarshal(raw, &sub); err == nil && sub.ThreadSpawn != nil {
				s.ParentThreadID = sub.ThreadSpawn.ParentThreadID
			}
		}
		return nil
	default:
		return fmt.Errorf("rollout: source is neither a string nor an object")
	}
}

// MarshalJSON writes the bytes as read, or the kind as a string.
func (s Source) MarshalJSON() ([]byte, error) {
	if s.Raw != nil {
		return s.Raw, nil
	}
	return json.Marshal(s.Kind)
}

// TurnContext is the payload of a turn_context record.
type TurnContext struct {
	TurnID         string          `json:"turn_id,omitempty"`
	Model          string          `json:"model"`
	ApprovalPolicy string          `json:"approval_policy"`
	SandboxPolicy  json.RawMessage `json:"sandbox_policy,omitempty"`
	Cwd            string          `json:"cwd,omitempty"`
	Effort         string          `json:"effort,omitempty"`
}

// WorldState is the payload of a world_state record: a full state, or an
// RFC 7396 JSON merge patch.
type WorldState struct {
	Full  bool            `json:"full"`
	State json.RawMessage `json:"state"`
}

// Compacted is the payload of a compacted record (a checkpoint).
type Compacted struct {
	Message string `json:"message"`
	// ReplacementHistory replaces the model history; nil for a legacy
	// compaction, which replay rebuilds as Codex does.
	ReplacementHistory []json.RawMessage `json:"replacement_history,omitempty"`
	WindowNumber       *int              `json:"window_number,omitempty"`
	// OpenCalls is a Logbook extension: the calls without an output or a
	// reconciled record in the physical log before this record. It lets a
	// resume start at the checkpoint and still report every dangling call.
	// nil means unknown (not written); empty means none.
	OpenCalls *[]OpenCall `json:"open_calls,omitempty"`
}

// OpenCall is a dangling call carried by a checkpoint.
type OpenCall struct {
	CallID         string `json:"call_id"`
	Name           string `json:"name,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	TurnID         string `json:"turn_id,omitempty"`
}

// ResponseItem holds the fields of a response_item payload replay reads; the
// payload itself stays raw.
type ResponseItem struct {
	Type           string           `json:"type"`
	Role           string           `json:"role,omitempty"`
	CallID         string           `json:"call_id,omitempty"`
	Name           string           `json:"name,omitempty"`
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	Content        []ContentElement `json:"content,omitempty"`
}

// ContentElement is one element of a message's content.
type ContentElement struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// Response item types replay interprets.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
	ItemCustomToolCall     = "custom_tool_call"
	ItemCustomToolOutput   = "custom_tool_call_output"
)

// IsCall reports whether the item type is a tool call that expects an output.
func IsCall(itemType string) bool {
	return itemType == ItemFunctionCall || itemType == ItemCustomToolCall
}

// IsCallOutput reports whether the item type is a tool call's output.
func IsCallOutput(itemType string) bool {
	return itemType == ItemFunctionCallOutput || itemType == ItemCustomToolOutput
}

// Text joins the non-empty text elements of a message, as Codex does.
func (it *ResponseItem) Text() string {
	var b []byte
	for _, c := range it.Content {
		if c.Text == "" {
			continue
		}
		if len(b) > 0 {
			b = append(b, '\n')
		}
		b = append(b, c.Text...)
	}
	return string(b)
}

// Decode unmarshals a payload into v with a message naming the record type.
func Decode[T any](r *Record) (T, error) {
	var v T
	if err := json.Unmarshal(r.Payload, &v); err != nil {
		return v, fmt.Errorf("rollout: %s payload: %w", r.Type, err)
	}
	return v, nil
}
