package replay

import (
	"errors"
	"fmt"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Options tune a replay.
type Options struct {
	// Salvage continues past corruption inside the dependency region, with a
	// warning, instead of failing.
	Salvage bool
	// Model is the model a resume is about to use; a different one from the
	// last in-effect model gives a model_changed warning (rule 9).
	Model string
}

// ErrCorruptRegion is returned (wrapped) when corruption inside the
// dependency region makes the replayed state untrustworthy.
var ErrCorruptRegion = errors.New("replay: corruption inside the dependency region")

// ErrDamagedIdentity is returned (wrapped) when lines before the canonical
// session_meta are damaged: the lost line may have been the real one.
var ErrDamagedIdentity = errors.New("replay: damage before the first session_meta; the thread's identity may be lost")

// head is what replay learns from the start of a log before anything else:
// the canonical session_meta and, for version-0 logs, where task_started
// records begin.
type head struct {
	meta     *rollout.SessionMeta
	metaLine int
	rules    turnRules
	read     int   // records read from the start
	readEnd  int64 // offset of the last of them (-1: none)
	// damage is what was damaged before the canonical session_meta.
	damage *rollout.CorruptionError
}

func readHead(log rollout.Log, opt Options) (head, error) {
	h := head{rules: turnRules{firstTaskStarted: -1}, readEnd: -1}
	c, err := log.Forward(0)
	if err != nil {
		return h, err
	}
	onDamage := func(ce *rollout.CorruptionError) error {
		if h.meta == nil && h.damage == nil && !ce.Torn() {
			h.damage = ce
		}
		return nil
	}
	err = rollout.Scan(c, onDamage, func(e rollout.Entry) (bool, error) {
		h.read, h.readEnd = h.read+1, e.Offset
		if h.meta == nil {
			if e.Type != rollout.TypeSessionMeta {
				return true, nil
			}
			m, err := rollout.Decode[rollout.SessionMeta](&e.Record)
			if err != nil {
				return false, fmt.Errorf("%s line %d: %w", log.Name(), e.Line, err)
			}
			if err := m.Validate(); err != nil {
				return false, fmt.Errorf("%s line %d: %w", log.Name(), e.Line, err)
			}
			h.meta, h.metaLine = &m, e.Line
			h.rules.v0 = m.SchemaVersion == 0
			return h.rules.v0, nil
		}
		if e.Type == rollout.TypeEventMsg && e.EventKind() == rollout.EventTaskStarted {
			h.rules.firstTaskStarted = e.Offset
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return h, err
	}
	if h.meta == nil {
		return h, fmt.Errorf("%s: %w (not a rollout?)", log.Name(), rollout.ErrNoSessionMeta)
	}
	if h.damage != nil && !opt.Salvage {
		return h, fmt.Errorf("%w: %w (use --salvage to take session_meta at line %d as canonical)", ErrDamagedIdentity, h.damage, h.metaLine)
	}
	return h, nil
}

// identityWarning is the salvage-mode warning for damage before the
// canonical session_meta.
func (h *head) identityWarning(st *State) {
	if h.damage == nil {
		return
	}
	st.Warnings = append(st.Warnings, Warning{Code: WarnSalvaged, Line: h.damage.Line, Offset: h.damage.Offset,
		Message: fmt.Sprintf("damage before the first session_meta (%v); took the one at line %d as canonical", h.damage, h.metaLine)})
}

// identity fills the fields that come from the canonical session_meta.
func (h *head) identity(st *State) {
	m := h.meta
	st.ThreadID = m.ID
	st.RolloutID = m.Rollout()
	st.ParentThreadID = m.Parent()
	st.ForkedFromID = m.ForkedFromID
	st.SessionID = m.SessionID
	st.Source = m.Source.Kind
	st.AgentRole = m.AgentRole
	st.HistoryMode = m.Mode()
	st.SchemaVersion = m.SchemaVersion
	st.Cwd = m.Cwd
	st.ReadOnly = m.SchemaVersion > rollout.Version
}

// closing adds the warnings that belong to no record.
func closing(st *State, opt Options) {
	if st.ReadOnly {
		st.Warnings = append(st.Warnings, Warning{Code: WarnReadOnly,
			Message: fmt.Sprintf("written by schema version %d; this reader knows %d: read-only, never resumed or appended to", st.SchemaVersion, rollout.Version)})
	}
	if opt.Model != "" && st.Model != "" && opt.Model != st.Model {
		st.Warnings = append(st.Warnings, Warning{Code: WarnModelChanged,
			Message: fmt.Sprintf("resuming with model %s; the last model in effect was %s: reasoning style, context fit and compaction may differ", opt.Model, st.Model)})
	}
}

func damageOf(ce *rollout.CorruptionError, inRegion bool) Corruption {
	return Corruption{Kind: rollout.KindName(ce.Kind), Line: ce.Line, Offset: ce.Offset, Ordinal: ce.Ordinal, Detail: ce.Detail, InRegion: inRegion}
}

// regionError is the strict-mode failure for damage inside the region.
func regionError(log rollout.Log, ce *rollout.CorruptionError) error {
	if ce.Line == 0 {
		if lines, err := log.LineNumbers([]int64{ce.Offset}); err == nil {
			ce.Line = lines[ce.Offset]
		}
	}
	return fmt.Errorf("%w: %w (it may have been a rollback marker or a setting; use --salvage to continue past it)", ErrCorruptRegion, ce)
}
