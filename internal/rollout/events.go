package rollout

import "encoding/json"

// Event kinds (event_msg payload.type) Logbook reads. Part of the wire format.
const (
	EventTaskStarted        = "task_started"
	EventTaskComplete       = "task_complete"
	EventTurnAborted        = "turn_aborted"
	EventThreadRolledBack   = "thread_rolled_back"
	EventTokenCount         = "token_count"
	EventUserMessage        = "user_message"
	EventAgentMessage       = "agent_message"
	EventThreadSpawned      = "thread_spawned"
	EventInterAgentSent     = "inter_agent_sent"
	EventInterAgentReceived = "inter_agent_received"
	EventReconciled         = "reconciled"
	EventRolloutSealed      = "rollout_sealed"
)

// Reasons of a turn_aborted event.
const (
	AbortInterrupted     = "interrupted"
	AbortReplaced        = "replaced"
	AbortStaleAfterCrash = "stale_after_crash"
	AbortError           = "error"
)

// Kinds of a cross-thread message.
const (
	MsgTask   = "task"   // parent to child
	MsgResult = "result" // child to parent
	MsgNote   = "note"
)

// Outcomes of a reconciled event.
const (
	OutcomeExecuted    = "executed"
	OutcomeNotExecuted = "not_executed"
	OutcomeUnknown     = "unknown"
	OutcomeDuplicate   = "duplicate"
)

// TurnEvent is task_started, task_complete or turn_aborted.
type TurnEvent struct {
	Type   string `json:"type"`
	TurnID string `json:"turn_id,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// RolledBack is thread_rolled_back.
type RolledBack struct {
	Type     string `json:"type"`
	NumTurns int64  `json:"num_turns"`
}

// TokenCount is token_count; Info is kept raw (Codex's shape).
type TokenCount struct {
	Type string          `json:"type"`
	Info json.RawMessage `json:"info"`
}

// ThreadSpawned is the parent's record of a child thread.
type ThreadSpawned struct {
	Type          string `json:"type"`
	ChildThreadID string `json:"child_thread_id"`
	AgentRole     string `json:"agent_role,omitempty"`
}

// InterAgentSent is logged (and flushed) by a sender before it publishes.
type InterAgentSent struct {
	Type           string          `json:"type"`
	MsgID          string          `json:"msg_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	ToThread       string          `json:"to_thread"`
	Kind           string          `json:"kind"`
	InReplyTo      string          `json:"in_reply_to,omitempty"`
	Body           json.RawMessage `json:"body,omitempty"`
}

// InterAgentReceived is logged (and flushed) by a receiver before it acks.
type InterAgentReceived struct {
	Type           string `json:"type"`
	MsgID          string `json:"msg_id"`
	IdempotencyKey string `json:"idempotency_key"`
	FromThread     string `json:"from_thread"`
	Kind           string `json:"kind"`
	InReplyTo      string `json:"in_reply_to,omitempty"`
}

// Reconciled records what a probe or a person found out about a call or a
// message whose outcome the log could not prove.
type Reconciled struct {
	Type     string `json:"type"`
	CallID   string `json:"call_id,omitempty"`
	MsgID    string `json:"msg_id,omitempty"`
	Outcome  string `json:"outcome"`
	Evidence string `json:"evidence"`
	By       string `json:"by"`
}

// RolloutSealed ends a rollout replaced by a revert.
type RolloutSealed struct {
	Type               string `json:"type"`
	SuccessorRolloutID string `json:"successor_rollout_id"`
}
