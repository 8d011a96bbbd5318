package rollout

import "strings"

// Persistence says whether an event belongs in the rollout.
type Persistence uint8

const (
	// Canonical events are facts a future replay needs: they are persisted.
	Canonical Persistence = iota
	// Transient events stream live and are never persisted: deltas, progress,
	// requests that wait on a live connection, notices.
	Transient
)

func (p Persistence) String() string {
	if p == Transient {
		return "transient"
	}
	return "canonical"
}

// eventPolicy is the persistence policy: the one table of event kinds. Kinds
// ending in _delta or _begin are transient whether listed or not; any other
// kind not listed is canonical, because dropping a fact this version does not
// know is worse than keeping one it does not need.
var eventPolicy = map[string]Persistence{
	// Lifecycle, metering, cross-thread ledger: canonical.
	EventTaskStarted:              Canonical,
	EventTaskComplete:             Canonical,
	EventTurnAborted:              Canonical,
	EventThreadRolledBack:         Canonical,
	EventTokenCount:               Canonical,
	EventUserMessage:              Canonical,
	EventAgentMessage:             Canonical,
	EventThreadSpawned:            Canonical,
	EventInterAgentSent:           Canonical,
	EventInterAgentReceived:       Canonical,
	EventReconciled:               Canonical,
	EventRolloutSealed:            Canonical,
	"agent_reasoning":             Canonical,
	"agent_reasoning_raw_content": Canonical,
	"context_compacted":           Canonical,
	"entered_review_mode":         Canonical,
	"exited_review_mode":          Canonical,
	"undo_completed":              Canonical,

	// Transient: derivable from complete items, or tied to a live connection.
	"item_started":                  Transient,
	"exec_approval_request":         Transient,
	"apply_patch_approval_request":  Transient,
	"elicitation_request":           Transient,
	"request_user_input":            Transient,
	"warning":                       Transient,
	"stream_error":                  Transient,
	"mcp_startup_update":            Transient,
	"mcp_startup_complete":          Transient,
	"session_configured":            Transient,
	"background_event":              Transient,
	"agent_reasoning_section_break": Transient,
}

// EventPolicy returns the persistence of an event_msg kind.
func EventPolicy(kind string) Persistence {
	if p, ok := eventPolicy[kind]; ok {
		return p
	}
	if strings.HasSuffix(kind, "_delta") || strings.HasSuffix(kind, "_begin") {
		return Transient
	}
	return Canonical
}

// Persist reports whether the writer keeps r: every record except an
// event_msg of a transient kind.
func Persist(r *Record) bool {
	if r.Type != TypeEventMsg {
		return true
	}
	return EventPolicy(r.EventKind()) == Canonical
}
