package replay

import (
	"github.com/logbook-agents/logbook/internal/rollout"
)

// kind is what a record means to replay.
type kind uint8

const (
	kOther kind = iota
	kUnknownType
	kSessionMeta
	kTaskStarted
	kTerminal // task_complete, turn_aborted
	kMarker   // thread_rolled_back
	kUserMessage
	kTaskReceipt // inter_agent_received of kind task
	kTurnContext
	kWorldState
	kCompacted
	kTokenCount
	kItem
	kReconciled
)

// fact is a record classified once, with the few fields every pass needs.
type fact struct {
	e        rollout.Entry
	k        kind
	numTurns int64 // kMarker
	// compaction facts (kCompacted)
	hasReplacement bool
	hasWindow      bool
	// token facts (kTokenCount)
	hasInfo  bool // info is not null
	hasTotal bool // info.total_token_usage is not null
}

func (f *fact) off() int64 { return f.e.Offset }

func classify(e rollout.Entry) fact {
	f := fact{e: e}
	p := e.Payload
	switch e.Type {
	case rollout.TypeSessionMeta:
		f.k = kSessionMeta
	case rollout.TypeTurnContext:
		f.k = kTurnContext
	case rollout.TypeWorldState:
		f.k = kWorldState
	case rollout.TypeResponseItem:
		f.k = kItem
	case rollout.TypeCompacted:
		f.k = kCompacted
		rh := rollout.Lookup(p, "replacement_history")
		f.hasReplacement = rh != nil && string(rh) != "null"
		wn := rollout.Lookup(p, "window_number")
		f.hasWindow = wn != nil && string(wn) != "null"
	case rollout.TypeEventMsg:
		kindStr, _ := rollout.LookupString(p, "type")
		switch kindStr {
		case rollout.EventTaskStarted:
			f.k = kTaskStarted
		case rollout.EventTaskComplete, rollout.EventTurnAborted:
			f.k = kTerminal
		case rollout.EventThreadRolledBack:
			f.k = kMarker
			f.numTurns = rollout.RollbackTurns(p)
		case rollout.EventUserMessage:
			f.k = kUserMessage
		case rollout.EventInterAgentReceived:
			if k, _ := rollout.LookupString(p, "kind"); k == rollout.MsgTask {
				f.k = kTaskReceipt
			}
		case rollout.EventTokenCount:
			f.k = kTokenCount
			info := rollout.Lookup(p, "info")
			f.hasInfo = info != nil && string(info) != "null" && len(info) > 0 && info[0] == '{'
			if f.hasInfo {
				tt := rollout.Lookup(info, "total_token_usage")
				f.hasTotal = tt != nil && string(tt) != "null"
			}
		case rollout.EventReconciled:
			f.k = kReconciled
		}
	default:
		f.k = kUnknownType
	}
	return f
}

// turnRules says which records start turns. In version-0 logs a user_message
// event starts a turn when no task_started comes before it (Codex logs older
// than task_started); otherwise only task_started does.
type turnRules struct {
	v0               bool
	firstTaskStarted int64 // offset of the first task_started; -1: none
}

func (t turnRules) startsTurn(f *fact) bool {
	if f.k == kTaskStarted {
		return true
	}
	return t.v0 && f.k == kUserMessage && (t.firstTaskStarted < 0 || f.off() < t.firstTaskStarted)
}

// isUserRecord: a record that makes the turn holding it a user turn.
func isUserRecord(f *fact) bool { return f.k == kUserMessage || f.k == kTaskReceipt }
