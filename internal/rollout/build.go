package rollout

import (
	"bytes"
	"encoding/json"
	"time"
)

// Builder makes well-formed records with consecutive ordinals and checksums.
// It is how Logbook's own writers (the coordinator, the simulator, tests)
// produce records; it never re-encodes a payload it is given as raw bytes.
type Builder struct {
	// Next is the ordinal the next record gets (0 is read as 1).
	Next int64
	// Now stamps records; nil means time.Now.
	Now func() time.Time
}

// Record wraps a payload into the next record.
func (b *Builder) Record(typ string, payload []byte) Record {
	if b.Next == 0 {
		b.Next = 1
	}
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	r := New(now(), b.Next, typ, payload)
	b.Next++
	return r
}

// JSON wraps a payload marshalled from v (without HTML escaping).
func (b *Builder) JSON(typ string, v any) Record {
	return b.Record(typ, MustJSON(v))
}

// Event wraps an event_msg payload marshalled from v.
func (b *Builder) Event(v any) Record { return b.JSON(TypeEventMsg, v) }

// MustJSON marshals v as compact JSON without HTML escaping; it panics on a
// value that cannot be marshalled (a programming error).
func MustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// Convenience constructors for the common payloads.

// Meta is a session_meta record.
func (b *Builder) Meta(m SessionMeta) Record {
	if m.SchemaVersion == 0 {
		m.SchemaVersion = Version
	}
	return b.JSON(TypeSessionMeta, m)
}

// TaskStarted opens a turn.
func (b *Builder) TaskStarted(turnID string) Record {
	return b.Event(TurnEvent{Type: EventTaskStarted, TurnID: turnID})
}

// TaskComplete ends a turn.
func (b *Builder) TaskComplete(turnID string) Record {
	return b.Event(TurnEvent{Type: EventTaskComplete, TurnID: turnID})
}

// TurnAborted ends a turn without completing it.
func (b *Builder) TurnAborted(turnID, reason string) Record {
	return b.Event(TurnEvent{Type: EventTurnAborted, TurnID: turnID, Reason: reason})
}

// UserMessage is the user_message event that makes a turn a user turn.
func (b *Builder) UserMessage(text string) Record {
	return b.Event(struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{EventUserMessage, text})
}

// RolledBack is a rollback marker.
func (b *Builder) RolledBack(n int64) Record {
	return b.Event(RolledBack{Type: EventThreadRolledBack, NumTurns: n})
}

// TurnContext records the settings of a turn.
func (b *Builder) TurnContext(tc TurnContext) Record { return b.JSON(TypeTurnContext, tc) }

// World records a full world state or a merge patch.
func (b *Builder) World(full bool, state any) Record {
	return b.JSON(TypeWorldState, struct {
		Full  bool `json:"full"`
		State any  `json:"state"`
	}{full, state})
}

// Message is a response_item message with one text element.
func (b *Builder) Message(role, text string) Record {
	return b.JSON(TypeResponseItem, MessageItem(role, text))
}

// MessageItem is a message response item.
func MessageItem(role, text string) json.RawMessage {
	kind := "input_text"
	if role == "assistant" {
		kind = "output_text"
	}
	return MustJSON(ResponseItem{Type: ItemMessage, Role: role, Content: []ContentElement{{Type: kind, Text: text}}})
}

// Call is a function_call response item.
func (b *Builder) Call(callID, name, arguments, idemKey string) Record {
	return b.JSON(TypeResponseItem, struct {
		Type           string `json:"type"`
		CallID         string `json:"call_id"`
		Name           string `json:"name"`
		Arguments      string `json:"arguments"`
		IdempotencyKey string `json:"idempotency_key,omitempty"`
	}{ItemFunctionCall, callID, name, arguments, idemKey})
}

// Output is a function_call_output response item.
func (b *Builder) Output(callID, output string) Record {
	return b.JSON(TypeResponseItem, struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}{ItemFunctionCallOutput, callID, output})
}

// Compacted is a checkpoint.
func (b *Builder) Compacted(c Compacted) Record { return b.JSON(TypeCompacted, c) }

// TokenCount is a token_count event with Codex's info shape.
func (b *Builder) TokenCount(total, last int64) Record {
	type usage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	}
	return b.Event(struct {
		Type string `json:"type"`
		Info any    `json:"info"`
	}{EventTokenCount, struct {
		Total usage `json:"total_token_usage"`
		Last  usage `json:"last_token_usage"`
	}{usage{total * 3 / 4, total / 4, total}, usage{last * 3 / 4, last / 4, last}}})
}
