package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/logbook-agents/logbook/agent"
)

// The simulated agent: a seeded, deterministic fake model (no network, no
// LLM) drives each thread. What is left to do is read from the thread's log
// each time it is opened (its world state and its deliveries), never kept
// in memory, so a thread can move to another worker at any moment:
//
//   - turns 1..T-1 are work turns (T for a leaf): user and assistant
//     messages, reasoning, a read-only tool call without a key, a
//     side-effecting call with an idempotency key executed by the world,
//     world-state patches, now and then a model switch, a compaction when
//     the simulated token count passes a threshold (before a turn or
//     mid-turn, with turn_context and a full world state written again
//     after it), and now and then a scratch turn rolled back;
//   - then every planned child is spawned with a task;
//   - once every child's result is received, a last turn, and the result
//     goes to the thread's parent.
//
// A turn records {"turn": n} first, so a turn cut off by a crash is not run
// again: its side effects are settled by the resume (the world's probe),
// never by running them twice.
type simAgent struct {
	world *worldClient
	log   *slog.Logger
	// crashAt is a named crash point: the worker SIGKILLs itself the
	// crashHit-th time it gets there ("" none). See crashPoints.
	crashAt  string
	crashHit int64
	hits     atomic.Int64
	// crashToken, if set, is a file the crash takes first (O_EXCL): of
	// several workers armed with one token, only the first to get there
	// dies.
	crashToken string
	// acks is the worker's own record of what it was told (--acks).
	acks *ackLog
	// think is how long each turn thinks before it acts, as a model does
	// (--think): the thread's lease is renewed meanwhile.
	think time.Duration
}

// Named crash points of a worker (agent-sim worker --crash POINT[:N]).
var crashPoints = map[string]string{
	"before_effect":    "a keyed call is logged and flushed; the world has not been asked",
	"after_effect":     "the world carried the effect out; its output is not logged",
	"between_barriers": "a turn's body is flushed and its end announced; task_complete is not flushed",
	"after_spawn":      "a child's thread_spawned is logged; the child and its task may not exist",
	"after_send_flush": "a message's inter_agent_sent is flushed; the mail is not published",
	"before_receipt":   "a mail message is taken from the mailbox; its inter_agent_received is not logged",
	"lease_renewal":    "a thread's lease renewal was answered by the bus; the holder has not taken the answer in",
}

// protocolPoints are the crash points inside the delivery protocol and the
// lease renewal: armed through internal/faults (they are reached in the
// agent and stream packages, not here).
var protocolPoints = map[string]string{
	"after_send_flush": "mail.after-sent-flush",
	"before_receipt":   "mail.before-receipt",
	"lease_renewal":    "lease.mid-renew",
}

// maybeCrash kills the process at its crash point, on its crashHit-th hit.
func (s *simAgent) maybeCrash(point string) {
	if s.crashAt == point && s.hits.Add(1) == max(s.crashHit, 1) && takeToken(s.crashToken) {
		s.log.Warn("crash point reached: SIGKILL", "point", point)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns
	}
}

// takeToken creates the crash token file; false if another process has.
func takeToken(path string) bool {
	if path == "" {
		return true
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	f.Close()
	return true
}

const tokenThreshold = 12000

var models = []string{"sim-large", "sim-small"}

// simState is the simulator's bookkeeping in the thread's world state.
type simState struct {
	Turn   int            `json:"turn"`
	Tokens int            `json:"tokens"`
	Model  string         `json:"model"`
	Files  map[string]int `json:"files"`
	Keys   []string       `json:"keys"`
}

func (s *simAgent) handle(ctx context.Context, th *agent.Thread, res *agent.Resumed) error {
	p, path, err := parseThread(th.ID())
	if err != nil { // not a simulated thread (a run's driver whose run died): leave it alone
		s.log.Debug("not a simulated thread", "thread", th.ID(), "err", err)
		return nil
	}
	pl, err := planOf(th.ID())
	if err != nil {
		return err
	}
	s.acks.resumed(th, res)
	mail, err := th.Receive(ctx, 64, 200*time.Millisecond)
	s.acks.received(th.ID(), mail)
	if err != nil {
		return err
	}
	st := simState{Files: map[string]int{}}
	if res.State != nil && len(res.State.WorldState) > 0 && string(res.State.WorldState) != "null" {
		if err := json.Unmarshal(res.State.WorldState, &st); err != nil {
			return fmt.Errorf("thread %s: world state: %w", th.ID(), err)
		}
	}
	if st.Files == nil {
		st.Files = map[string]int{}
	}
	baseline := res.State != nil && len(res.State.WorldState) > 0 && string(res.State.WorldState) != "null"
	if res.State != nil { // a crash between a compaction and its full world state loses the baseline, not the count
		st.Turn = max(st.Turn, turnFromHistory(res.State.History))
	}
	if st.Model == "" {
		st.Model = models[0]
	}
	proven := provenCalls(res)
	d, err := th.Deliveries(ctx)
	if err != nil {
		return err
	}
	var task *agent.Received
	for i := range d.Received {
		if d.Received[i].Kind == agent.KindTask {
			task = &d.Received[i]
			break
		}
	}
	if task == nil {
		return nil // not started yet: its task has not arrived
	}
	if sentKind(d, agent.KindResult, task.From) {
		// Done; the report may have been lost to a crash after the send.
		return s.report(ctx, th, task, st, d)
	}
	children := pl.children[th.ID()]
	work := p.Turn
	if len(children) > 0 {
		work = p.Turn - 1
	}
	for st.Turn < work {
		if err := s.turn(ctx, th, p, path, &st, &proven, false, &baseline); err != nil {
			return err
		}
	}
	for _, c := range children {
		if sentKind(d, agent.KindTask, c) {
			continue
		}
		if err := spawn(ctx, th, c); err != nil {
			return err
		}
		s.acks.acked(th)
		s.maybeCrash("after_spawn")
	}
	for _, c := range children {
		if !receivedFrom(d, agent.KindResult, c) {
			return nil // waits for results: offered again when one arrives
		}
	}
	if st.Turn < p.Turn {
		if err := s.turn(ctx, th, p, path, &st, &proven, true, &baseline); err != nil {
			return err
		}
	}
	if _, err := th.Send(ctx, agent.Outgoing{To: task.From, Kind: agent.KindResult, Body: map[string]any{"thread": th.ID(), "turns": st.Turn},
		IdempotencyKey: "result:" + task.IdempotencyKey, InReplyTo: task.MsgID}); err != nil {
		return err
	}
	s.acks.acked(th)
	if d, err = th.Deliveries(ctx); err != nil {
		return err
	}
	return s.report(ctx, th, task, st, d)
}

// report tells the world what a finished thread did (again, after a crash
// between its result and its report: the world keeps the last).
func (s *simAgent) report(ctx context.Context, th *agent.Thread, task *agent.Received, st simState, d *agent.Deliveries) error {
	r := report{Thread: th.ID(), Parent: task.From, Turns: st.Turn, Records: th.LastOrdinal(), Keys: st.Keys, Sent: []reportSent{}}
	for _, s := range d.Sent {
		r.Sent = append(r.Sent, reportSent{MsgID: s.MsgID, Kind: s.Kind, To: s.To})
	}
	if r.Keys == nil {
		r.Keys = []string{}
	}
	return s.world.report(ctx, r)
}

// turnFromHistory is the last turn number the history in effect names
// ("step N of", or a compaction's "up to turn N").
func turnFromHistory(history []json.RawMessage) int {
	n := 0
	for _, item := range history {
		var m struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(item, &m) != nil {
			continue
		}
		for _, c := range m.Content {
			var k int
			var rest string
			if _, err := fmt.Sscanf(c.Text, "step %d of %s", &k, &rest); err == nil {
				n = max(n, k)
			} else if i := strings.LastIndex(c.Text, " up to turn "); i >= 0 {
				if k, err := strconv.Atoi(c.Text[i+len(" up to turn "):]); err == nil {
					n = max(n, k)
				}
			}
		}
	}
	return n
}

// spawn creates a child with its task; a child that exists already (a
// crash after its creation and before the task was logged) gets the task.
func spawn(ctx context.Context, th *agent.Thread, child string) error {
	_, err := th.Spawn(ctx, agent.ThreadSpec{ID: child, Role: "sim"}, agent.Task{Body: map[string]string{"do": child}})
	if errors.Is(err, agent.ErrThreadExists) {
		_, err = th.Send(ctx, agent.Outgoing{To: child, Kind: agent.KindTask, Body: map[string]string{"do": child}, IdempotencyKey: "task:" + child})
	}
	return err
}

func sentKind(d *agent.Deliveries, kind, to string) bool {
	return slices.ContainsFunc(d.Sent, func(s agent.Sent) bool { return s.Kind == kind && s.To == to })
}

func receivedFrom(d *agent.Deliveries, kind, from string) bool {
	return slices.ContainsFunc(d.Received, func(r agent.Received) bool { return r.Kind == kind && r.From == from })
}

// provenCalls are the calls a probe proved never executed: a later turn
// retries them under their key.
func provenCalls(res *agent.Resumed) [][2]string {
	var out [][2]string // call id, idempotency key
	for _, f := range res.Findings {
		if f.Question.CallID != "" && f.Question.IdempotencyKey != "" && f.Answer.Outcome == agent.NotExecuted {
			out = append(out, [2]string{f.Question.CallID, f.Question.IdempotencyKey})
		}
	}
	return out
}

// turn runs one simulated turn.
func (s *simAgent) turn(ctx context.Context, th *agent.Thread, p params, path []int, st *simState, proven *[][2]string, last bool, baseline *bool) error {
	n := st.Turn + 1
	rng := rngFor(p, path, n, "turn")
	if rng.IntN(7) == 0 {
		st.Model = models[rng.IntN(len(models))]
	}
	settings := agent.TurnContext{Model: st.Model, ApprovalPolicy: "never", Cwd: "/sim"}
	turn, err := th.BeginTurn(ctx, agent.TurnSpec{Context: settings, UserText: fmt.Sprintf("step %d of %s", n, th.ID())})
	if err != nil {
		return err
	}
	st.Turn = n
	if *baseline { // replay applies patches only onto a full baseline
		if err := turn.World(ctx, false, map[string]int{"turn": n}); err != nil {
			return err
		}
	} else if err := turn.World(ctx, true, st); err != nil {
		return err
	}
	*baseline = true
	if s.think > 0 {
		select {
		case <-time.After(s.think):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	compact := func() error {
		summary := fmt.Sprintf("summary of %s up to turn %d", th.ID(), n)
		item, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": []map[string]string{{"type": "input_text", "text": summary}}})
		if err := turn.Compact(ctx, summary, []json.RawMessage{item}); err != nil {
			return err
		}
		st.Tokens = 0
		if err := turn.Settings(ctx, settings); err != nil {
			return err
		}
		return turn.World(ctx, true, st)
	}
	if st.Tokens > tokenThreshold { // before the turn's work
		if err := compact(); err != nil {
			return err
		}
	}
	if err := turn.Item(ctx, json.RawMessage(`{"type":"reasoning","summary":[]}`)); err != nil {
		return err
	}
	if _, err := turn.Call(ctx, agent.CallSpec{Name: "read_file", Arguments: fmt.Sprintf(`{"path":"f%d"}`, n)},
		func(context.Context) (string, error) { return fmt.Sprintf("contents of f%d", n), nil }); err != nil {
		return err
	}
	for _, c := range *proven {
		s.acks.retried(th.ID(), c[1])
		if _, err := turn.RetryCall(ctx, c[0], agent.CallSpec{}, s.effect(th.ID(), c[1])); err != nil && !errors.Is(err, agent.ErrOutcomeUnknown) {
			return err
		}
	}
	*proven = nil
	if last || rng.IntN(5) < 3 {
		key := fmt.Sprintf("%s-t%d", th.ID(), n)
		st.Keys = append(st.Keys, key)
		if err := turn.World(ctx, false, map[string][]string{"keys": st.Keys}); err != nil {
			return err
		}
		_, err := turn.Call(ctx, agent.CallSpec{Name: "apply", Arguments: fmt.Sprintf(`{"file":"f%d"}`, n), IdempotencyKey: key}, s.effect(th.ID(), key))
		if err != nil && !errors.Is(err, agent.ErrOutcomeUnknown) {
			return err
		}
	}
	st.Files[fmt.Sprintf("f%d", n)] = n
	if err := turn.World(ctx, false, map[string]any{"files": map[string]int{fmt.Sprintf("f%d", n): n}}); err != nil {
		return err
	}
	st.Tokens += 1500 + rng.IntN(4000)
	if st.Tokens > tokenThreshold && rng.IntN(2) == 0 { // mid-turn
		if err := compact(); err != nil {
			return err
		}
	}
	if err := turn.World(ctx, false, map[string]int{"tokens": st.Tokens}); err != nil {
		return err
	}
	if err := turn.Message(ctx, "assistant", fmt.Sprintf("turn %d done", n)); err != nil {
		return err
	}
	if err := turn.End(ctx, func(int64) { s.maybeCrash("between_barriers") }); err != nil {
		return err
	}
	s.acks.acked(th)
	if rng.IntN(8) == 0 { // a scratch turn, then rolled back
		scratch, err := th.BeginTurn(ctx, agent.TurnSpec{Context: settings, UserText: "try something"})
		if err != nil {
			return err
		}
		if err := scratch.Message(ctx, "assistant", "that was a dead end"); err != nil {
			return err
		}
		if err := scratch.End(ctx, nil); err != nil {
			return err
		}
		if err := th.Rollback(ctx, 1); err != nil {
			return err
		}
	}
	return nil
}

// effect carries out a keyed side effect in the world.
func (s *simAgent) effect(thread, key string) agent.Effect {
	return func(ctx context.Context) (string, error) {
		s.maybeCrash("before_effect")
		out, err := s.world.exec(ctx, execReq{Key: key, Thread: thread, Op: "apply"})
		if err == nil {
			s.maybeCrash("after_effect")
		}
		return out, err
	}
}
