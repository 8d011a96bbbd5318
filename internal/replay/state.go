package replay

import (
	"bytes"
	"encoding/json"
)

// Turn statuses.
const (
	StatusCompleted   = "completed"
	StatusAborted     = "aborted"
	StatusRolledBack  = "rolled_back"
	StatusInterrupted = "interrupted"
)

// State is what replay rebuilds: the material a new session starts from.
// Its JSON form is `coordinator replay --json` (docs/FORMAT.md, docs/CLI.md).
type State struct {
	ThreadID       string `json:"thread_id"`
	RolloutID      string `json:"rollout_id"`
	ParentThreadID string `json:"parent_thread_id,omitempty"`
	ForkedFromID   string `json:"forked_from_id,omitempty"`
	SessionID      string `json:"session_id,omitempty"`
	Source         string `json:"source,omitempty"`
	AgentRole      string `json:"agent_role,omitempty"`
	HistoryMode    string `json:"history_mode"`
	SchemaVersion  int    `json:"schema_version"`
	// ReadOnly: written by a newer schema version; it can be shown, never
	// resumed or appended to.
	ReadOnly bool `json:"read_only,omitempty"`

	Model          string          `json:"model"`
	ApprovalPolicy string          `json:"approval_policy"`
	SandboxPolicy  json.RawMessage `json:"sandbox_policy,omitempty"`
	Effort         string          `json:"effort,omitempty"`
	Cwd            string          `json:"cwd"`
	Window         int             `json:"window"`
	// WorldState is the baseline with its patches applied; null when no
	// baseline is in effect.
	WorldState  json.RawMessage `json:"world_state"`
	TokenUsage  json.RawMessage `json:"token_usage"`
	TokensSpent json.RawMessage `json:"tokens_spent"`

	// History is the model history in effect: response items as in the log.
	History []json.RawMessage `json:"history"`
	// Turns are the turns of the current window: the turn that holds the
	// newest checkpoint in effect and every turn after it (all turns when no
	// checkpoint is in effect). The index lists every turn of a thread.
	Turns []Turn `json:"turns"`
	// DanglingCalls are calls with no output and no reconciled record after
	// them anywhere in the physical log: their effect is unknown.
	DanglingCalls []Call    `json:"dangling_calls"`
	Warnings      []Warning `json:"warnings"`

	Replay Stats `json:"replay"`
}

// Turn is one turn's lifecycle.
type Turn struct {
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// User: the turn holds a user message or a task received from a parent;
	// only user turns are counted by rollback.
	User    bool  `json:"user"`
	Ordinal int64 `json:"ordinal,omitempty"`
	offset  int64
}

// Call is a dangling call.
type Call struct {
	CallID         string `json:"call_id"`
	Name           string `json:"name"`
	IdempotencyKey string `json:"idempotency_key"`
	TurnID         string `json:"turn_id"`
}

// Warning codes.
const (
	WarnMissingBaseline  = "missing_baseline"
	WarnLegacyCompaction = "legacy_compaction"
	WarnModelChanged     = "model_changed"
	WarnReadOnly         = "read_only"
	WarnBadPayload       = "bad_payload"
	WarnSalvaged         = "salvaged_corruption"
)

// Warning is something replay noticed and went past.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Ordinal int64  `json:"ordinal,omitempty"`
	Line    int    `json:"line,omitempty"`
	Offset  int64  `json:"offset"`
}

// Stats describe the replay itself, not the thread: they differ between the
// fast path and the naive fold by design.
type Stats struct {
	Mode         string `json:"mode"` // fast | naive | fast-fallback
	RecordsRead  int    `json:"records_read"`
	StartOrdinal int64  `json:"start_ordinal"`
	StartOffset  int64  `json:"start_offset"`
	// Checkpoint is the newest in-effect compaction with a replacement
	// history the state starts from (0 and -1 when there is none): what the
	// index's checkpoint locator must name.
	CheckpointOrdinal int64 `json:"checkpoint_ordinal"`
	CheckpointOffset  int64 `json:"checkpoint_offset"`
	// CorruptLines counts damaged lines seen (a torn tail is not counted).
	CorruptLines int          `json:"corrupt_lines"`
	TornTail     bool         `json:"torn_tail,omitempty"`
	Corruption   []Corruption `json:"corruption,omitempty"`
	UnknownTypes int          `json:"unknown_types,omitempty"`
}

// Corruption is one damaged line as reported.
type Corruption struct {
	Kind    string `json:"kind"`
	Line    int    `json:"line,omitempty"`
	Offset  int64  `json:"offset"`
	Ordinal int64  `json:"ordinal,omitempty"`
	Detail  string `json:"detail"`
	// InRegion: inside the dependency region, where it can change the state.
	InRegion bool `json:"in_region"`
}

// MarshalIndent renders the state as indented JSON, payload bytes unescaped.
func (s *State) MarshalIndent() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s.normalized()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// normalized returns a copy whose nil lists are empty, so JSON shows [].
func (s *State) normalized() *State {
	c := *s
	if c.History == nil {
		c.History = []json.RawMessage{}
	}
	if c.Turns == nil {
		c.Turns = []Turn{}
	}
	if c.DanglingCalls == nil {
		c.DanglingCalls = []Call{}
	}
	if c.Warnings == nil {
		c.Warnings = []Warning{}
	}
	return &c
}
