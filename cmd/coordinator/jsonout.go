package main

import (
	"encoding/json"
	"fmt"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/reconcile"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/tree"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// The --json shapes of the commands, one struct each: snake_case keys from
// explicit tags, every key always present, lists [] never null. Internal
// types are converted into these, never printed as they are, so renaming a
// Go field cannot change what scripts read. docs/CLI.md documents each shape
// with an example; jsonshape_test.go holds the same shapes and the tests
// decode every command's output strictly into them. (replay, show and verify
// print their own documented shapes: replay.State, verifyJSON.)

// stateJSON is a replayed state exactly as replay --json prints it.
func stateJSON(st *replay.State) (json.RawMessage, error) {
	if st == nil {
		return json.RawMessage("null"), nil
	}
	return st.MarshalIndent()
}

type positionJSON struct {
	RolloutID           string `json:"rollout_id"`
	EndOrdinalExclusive int64  `json:"end_ordinal_exclusive"`
	EndByteOffset       int64  `json:"end_byte_offset"`
}

func positionOf(p rollout.HistoryPosition) positionJSON {
	return positionJSON{RolloutID: p.RolloutID, EndOrdinalExclusive: p.EndOrdinalExclusive, EndByteOffset: p.EndByteOffset}
}

type forkJSON struct {
	ThreadID      string          `json:"thread_id"`
	RolloutID     string          `json:"rollout_id"`
	FromThreadID  string          `json:"from_thread_id"`
	FromRolloutID string          `json:"from_rollout_id"`
	Mode          string          `json:"mode"`
	Position      positionJSON    `json:"position"`
	Copied        int             `json:"copied"`
	AbortedTurn   string          `json:"aborted_turn"`
	State         json.RawMessage `json:"state"`
	NotUndone     string          `json:"not_undone"`
}

func forkOf(r *ops.ForkResult) (forkJSON, error) {
	st, err := stateJSON(r.State)
	return forkJSON{ThreadID: r.Thread, RolloutID: r.Rollout, FromThreadID: r.From, FromRolloutID: r.FromRollout, Mode: r.Mode,
		Position: positionOf(r.Position), Copied: r.Copied, AbortedTurn: r.AbortedTurn, State: st, NotUndone: ops.NotUndone}, err
}

// historyJSON is rollback's and revert's result.
type historyJSON struct {
	ThreadID        string          `json:"thread_id"`
	RolloutID       string          `json:"rollout_id"`
	SealedRolloutID string          `json:"sealed_rollout_id"`
	HistoryBase     *positionJSON   `json:"history_base"`
	UndoneTurns     []string        `json:"undone_turns"`
	State           json.RawMessage `json:"state"`
	NotUndone       string          `json:"not_undone"`
}

func historyOf(r *ops.Result) (historyJSON, error) {
	st, err := stateJSON(r.State)
	out := historyJSON{ThreadID: r.Thread, RolloutID: r.Rollout, SealedRolloutID: r.Sealed, UndoneTurns: nonNil(r.Undone),
		State: st, NotUndone: ops.NotUndone}
	if r.Base != nil {
		p := positionOf(*r.Base)
		out.HistoryBase = &p
	}
	return out, err
}

type callJSON struct {
	CallID         string `json:"call_id"`
	Name           string `json:"name"`
	IdempotencyKey string `json:"idempotency_key"`
	TurnID         string `json:"turn_id"`
}

type findingJSON struct {
	CallID   string `json:"call_id"`
	MsgID    string `json:"msg_id"`
	ToThread string `json:"to_thread"`
	Mail     string `json:"mail"`
	Outcome  string `json:"outcome"`
	Evidence string `json:"evidence"`
	By       string `json:"by"`
	Recorded bool   `json:"recorded"` // appended now; false: the rollout already said so
}

type unresolvedJSON struct {
	callJSON
	Reconcile string `json:"reconcile"` // the command a person runs once they know
}

type resumeJSON struct {
	ThreadID     string           `json:"thread_id"`
	RolloutID    string           `json:"rollout_id"`
	AbortedTurn  string           `json:"aborted_turn"`
	UnknownCalls []callJSON       `json:"unknown_calls"`
	Findings     []findingJSON    `json:"findings"`
	Resent       []string         `json:"resent"`
	Appended     int              `json:"appended"`
	Unresolved   []unresolvedJSON `json:"unresolved"`
	Read         ops.ReadStats    `json:"read"`
	State        json.RawMessage  `json:"state"`
}

func resumeOf(rep *reconcile.ResumeReport) (resumeJSON, error) {
	out := resumeJSON{ThreadID: rep.Thread, RolloutID: rep.Rollout, AbortedTurn: rep.Aborted, UnknownCalls: []callJSON{},
		Findings: []findingJSON{}, Resent: nonNil(rep.Resent), Appended: rep.Appended, Unresolved: []unresolvedJSON{}, Read: rep.Read}
	if rep.Plan != nil {
		for _, c := range rep.Plan.Unknown {
			out.UnknownCalls = append(out.UnknownCalls, callOf(c))
		}
	}
	recorded := map[reconcile.Finding]bool{}
	for _, f := range rep.Recorded {
		recorded[f] = true
	}
	for _, f := range rep.Findings {
		q, a := f.Question, f.Answer
		out.Findings = append(out.Findings, findingJSON{CallID: q.CallID, MsgID: q.MsgID, ToThread: q.To, Mail: q.Mail,
			Outcome: a.Outcome, Evidence: a.Evidence, By: a.By, Recorded: recorded[f]})
	}
	for _, c := range unresolved(rep) {
		out.Unresolved = append(out.Unresolved, unresolvedJSON{callOf(c), reconcileCommand(rep.Thread, c.CallID)})
	}
	var err error
	out.State, err = stateJSON(rep.State)
	return out, err
}

func callOf(c replay.Call) callJSON {
	return callJSON{CallID: c.CallID, Name: c.Name, IdempotencyKey: c.IdempotencyKey, TurnID: c.TurnID}
}

// unresolved are the calls still unknown after the resume: a person must
// find out what happened and record it.
func unresolved(rep *reconcile.ResumeReport) []replay.Call {
	if rep.State == nil {
		return nil
	}
	return rep.State.DanglingCalls
}

// reconcileCommand is what a person runs to record what they found out.
func reconcileCommand(thread, call string) string {
	return fmt.Sprintf("coordinator reconcile %s --call %s --outcome executed|not_executed|duplicate --evidence TEXT", thread, call)
}

type reconcileJSON struct {
	ThreadID string `json:"thread_id"`
	Ordinal  int64  `json:"ordinal"`
	CallID   string `json:"call_id"`
	MsgID    string `json:"msg_id"`
	Outcome  string `json:"outcome"`
	Evidence string `json:"evidence"`
	By       string `json:"by"`
}

type gcRolloutJSON struct {
	RolloutID string `json:"rollout_id"`
	ThreadID  string `json:"thread_id"`
	Reason    string `json:"reason"`
}

type gcJSON struct {
	Removed      []gcRolloutJSON `json:"removed"`
	Kept         []gcRolloutJSON `json:"kept"`
	DryRun       bool            `json:"dry_run"`
	SkippedPacks int             `json:"skipped_packs"`
}

func gcOf(r *ops.GCResult) gcJSON {
	conv := func(rs []ops.GCRollout) []gcRolloutJSON {
		out := []gcRolloutJSON{}
		for _, r := range rs {
			out = append(out, gcRolloutJSON{RolloutID: r.ID, ThreadID: r.Thread, Reason: r.Reason})
		}
		return out
	}
	return gcJSON{Removed: conv(r.Removed), Kept: conv(r.Kept), DryRun: r.DryRun, SkippedPacks: r.SkippedPacks}
}

type importJSON struct {
	Path         string `json:"path"`
	ThreadID     string `json:"thread_id"`
	RolloutID    string `json:"rollout_id"`
	Records      int    `json:"records"`
	Published    int    `json:"published"`
	Skipped      string `json:"skipped"`
	DamagedLines int    `json:"damaged_lines"`
	TornTail     string `json:"torn_tail"`
	Error        string `json:"error"`
}

func importOf(res []ops.Imported) []importJSON {
	out := []importJSON{}
	for _, im := range res {
		out = append(out, importJSON{Path: im.Path, ThreadID: im.Thread, RolloutID: im.Rollout, Records: im.Records, Published: im.Published,
			Skipped: im.Skipped, DamagedLines: im.Damaged, TornTail: im.TornTail, Error: im.Err})
	}
	return out
}

type countsJSON struct {
	InterruptedTurns       int `json:"interrupted_turns"`
	UnknownCalls           int `json:"unknown_calls"`
	DeliveriesNotConfirmed int `json:"deliveries_not_confirmed"`
}

type nodeJSON struct {
	ThreadID       string      `json:"thread_id"`
	ParentThreadID string      `json:"parent_thread_id"`
	ForkedFromID   string      `json:"forked_from_id"`
	RolloutID      string      `json:"rollout_id"`
	Rollouts       []string    `json:"rollouts"`
	AgentRole      string      `json:"agent_role"`
	Status         string      `json:"status"`
	Counts         countsJSON  `json:"counts"`
	Unconfirmed    int         `json:"unconfirmed"`
	Children       []*nodeJSON `json:"children"`
}

func nodeOf(n *tree.Node) *nodeJSON {
	out := &nodeJSON{ThreadID: n.ThreadID, ParentThreadID: n.ParentThreadID, ForkedFromID: n.ForkedFromID, RolloutID: n.RolloutID,
		Rollouts: nonNil(n.Rollouts), AgentRole: n.AgentRole, Status: n.Status, Unconfirmed: n.Unconfirmed, Children: []*nodeJSON{},
		Counts: countsJSON{InterruptedTurns: n.Counts.InterruptedTurns, UnknownCalls: n.Counts.UnknownCalls,
			DeliveriesNotConfirmed: n.Counts.DeliveriesUnconfirmed}}
	for _, c := range n.Children {
		out.Children = append(out.Children, nodeOf(c))
	}
	return out
}

type treeProblemJSON struct {
	Kind      string `json:"kind"`
	ThreadID  string `json:"thread_id"`
	RolloutID string `json:"rollout_id"`
	Detail    string `json:"detail"`
}

type treeJSON struct {
	Roots    []*nodeJSON       `json:"roots"`
	Orphans  []string          `json:"orphans"`
	Problems []treeProblemJSON `json:"problems"`
}

func treeOf(t *tree.Tree, roots []*tree.Node) treeJSON {
	out := treeJSON{Roots: []*nodeJSON{}, Orphans: nonNil(t.Orphans), Problems: []treeProblemJSON{}}
	for _, n := range roots {
		out.Roots = append(out.Roots, nodeOf(n))
	}
	for _, p := range t.Problems {
		out.Problems = append(out.Problems, treeProblemJSON{Kind: p.Kind, ThreadID: p.Thread, RolloutID: p.Rollout, Detail: p.Detail})
	}
	return out
}

// pageNodeJSON is a node of a paged tree: no children, its depth and how
// many children it has instead.
type pageNodeJSON struct {
	ThreadID       string     `json:"thread_id"`
	ParentThreadID string     `json:"parent_thread_id"`
	ForkedFromID   string     `json:"forked_from_id"`
	RolloutID      string     `json:"rollout_id"`
	Rollouts       []string   `json:"rollouts"`
	AgentRole      string     `json:"agent_role"`
	Status         string     `json:"status"`
	Counts         countsJSON `json:"counts"`
	Unconfirmed    int        `json:"unconfirmed"`
	Depth          int        `json:"depth"`
	ChildCount     int        `json:"child_count"`
}

type treePageJSON struct {
	Nodes      []pageNodeJSON    `json:"nodes"`
	Orphans    []string          `json:"orphans"`
	Problems   []treeProblemJSON `json:"problems"`
	NextCursor string            `json:"next_cursor"`
}

// treePageOf is a page of nodes; orphans and problems on the first page.
func treePageOf(t *tree.Tree, page tree.Page, first bool) treePageJSON {
	out := treePageJSON{Nodes: []pageNodeJSON{}, Orphans: []string{}, Problems: []treeProblemJSON{}, NextCursor: page.NextCursor}
	for _, n := range page.Nodes {
		j := nodeOf(n.Node)
		out.Nodes = append(out.Nodes, pageNodeJSON{ThreadID: j.ThreadID, ParentThreadID: j.ParentThreadID, ForkedFromID: j.ForkedFromID,
			RolloutID: j.RolloutID, Rollouts: j.Rollouts, AgentRole: j.AgentRole, Status: j.Status, Counts: j.Counts, Unconfirmed: j.Unconfirmed,
			Depth: n.Depth, ChildCount: len(n.Children)})
	}
	if first {
		full := treeOf(t, nil)
		out.Orphans, out.Problems = full.Orphans, full.Problems
	}
	return out
}

type childResultJSON struct {
	TaskMsgID    string `json:"task_msg_id"`
	ResultMsgID  string `json:"result_msg_id"`
	ParentThread string `json:"parent_thread"`
	ChildThread  string `json:"child_thread"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
}

type deliveryJSON struct {
	MsgID            string `json:"msg_id"`
	IdempotencyKey   string `json:"idempotency_key"`
	FromThread       string `json:"from_thread"`
	ToThread         string `json:"to_thread"`
	Kind             string `json:"kind"`
	InReplyTo        string `json:"in_reply_to"`
	State            string `json:"state"`
	Reason           string `json:"reason"`
	Sends            int    `json:"sends"`
	Receipts         int    `json:"receipts"`
	ReceiptsInEffect int    `json:"receipts_in_effect"`
}

type unconfirmedJSON struct {
	ChildResults []childResultJSON `json:"child_results"`
	Deliveries   []deliveryJSON    `json:"deliveries"`
	Confirmed    int               `json:"confirmed"`
	NextCursor   string            `json:"next_cursor"`
}

func unconfirmedOf(results []dedupe.ChildResult, pending []dedupe.Delivery, confirmed int, next string) unconfirmedJSON {
	out := unconfirmedJSON{ChildResults: []childResultJSON{}, Deliveries: []deliveryJSON{}, Confirmed: confirmed, NextCursor: next}
	for _, r := range results {
		out.ChildResults = append(out.ChildResults, childResultJSON{TaskMsgID: r.TaskMsgID, ResultMsgID: r.ResultMsgID,
			ParentThread: r.Parent, ChildThread: r.Child, State: r.State, Reason: r.Reason})
	}
	for _, d := range pending {
		out.Deliveries = append(out.Deliveries, deliveryJSON{MsgID: d.MsgID, IdempotencyKey: d.IdempotencyKey, FromThread: d.FromThread,
			ToThread: d.ToThread, Kind: d.Kind, InReplyTo: d.InReplyTo, State: d.State, Reason: d.Reason, Sends: d.Sends,
			Receipts: d.Receipts, ReceiptsInEffect: d.InEffect})
	}
	return out
}

type threadJSON struct {
	ThreadID         string `json:"thread_id"`
	ParentThreadID   string `json:"parent_thread_id"`
	ForkedFromID     string `json:"forked_from_id"`
	Source           string `json:"source"`
	AgentRole        string `json:"agent_role"`
	Title            string `json:"title"`
	FirstMessage     string `json:"first_message"`
	Model            string `json:"model"`
	Cwd              string `json:"cwd"`
	CreatedAt        string `json:"created_at"`
	UpdatedAt        string `json:"updated_at"`
	Status           string `json:"status"`
	CurrentRolloutID string `json:"current_rollout_id"`
	Rollouts         int    `json:"rollouts"`
}

type threadsJSON struct {
	Threads    []threadJSON `json:"threads"`
	NextCursor string       `json:"next_cursor"`
}

func threadsOf(page index.ThreadPage) threadsJSON {
	out := threadsJSON{Threads: []threadJSON{}, NextCursor: page.NextCursor}
	for _, t := range page.Threads {
		out.Threads = append(out.Threads, threadJSON{ThreadID: t.ID, ParentThreadID: t.ParentThreadID, ForkedFromID: t.ForkedFromID,
			Source: t.Source, AgentRole: t.AgentRole, Title: t.Title, FirstMessage: t.FirstMessage, Model: t.Model, Cwd: t.Cwd,
			CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Status: t.Status, CurrentRolloutID: t.CurrentRolloutID, Rollouts: t.Rollouts})
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
