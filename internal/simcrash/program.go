package simcrash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/logbook-agents/logbook/agent"
)

// The scripted agents. Like agent-sim's, they decide what is left to do
// from their thread's log each time it is opened (its world state, its
// deliveries, its calls), never from memory, so any crash leaves work a
// later process finds and finishes. What they do between opens is kept in
// memory (the process is alive): threadRun.
//
// A work turn writes its world state first ({"thread","rollout","turn"}),
// then its keyed calls, each logged and flushed before the world is asked.
// A turn whose world state reached the bus counts as done, whatever
// followed: its calls are settled on the next open, from the log and the
// resume's probe findings, in a repair turn: a call proven not executed
// is retried (Turn.RetryCall), a planned call never logged is made, a
// call the probe found executed is done. Nothing is ever run again on a
// guess.

var turnContext = agent.TurnContext{Model: "sim", ApprovalPolicy: "never", Cwd: "/sim"}

// worldState is what a turn records as its full world state.
type worldState struct {
	Thread  string `json:"thread"`
	Rollout string `json:"rollout"`
	Turn    int    `json:"turn"`
	Plan    string `json:"plan"` // "A", or "B" after a redo
}

// threadRun is one open thread of a process.
type threadRun struct {
	plan  *Plan
	n     *node
	th    *agent.Thread
	opens int // this process's opens of the thread so far (ids stay unique)

	st         worldState
	task, redo *agent.Received
	sent       map[string]int  // idempotency key -> sends in the view
	got        map[string]bool // idempotency keys received
	logged     map[string]bool // keys with a function_call in the view
	settled    map[string]bool // keys with an output, or found executed
	proven     map[string]string
	needRepair bool
}

func taskKey(thread string) string { return "task:" + thread }
func redoKey(thread string) string { return "redo:" + thread }

// load reads what the thread's log says: its world state, calls and
// deliveries, and the resume's findings.
func (r *threadRun) load(ctx context.Context, res *agent.Resumed) error {
	r.sent, r.got = map[string]int{}, map[string]bool{}
	r.logged, r.settled, r.proven = map[string]bool{}, map[string]bool{}, map[string]string{}
	r.task, r.redo = nil, nil
	r.st = worldState{}
	if res != nil && res.State != nil {
		st := res.State
		if len(st.WorldState) > 0 && string(st.WorldState) != "null" {
			if err := json.Unmarshal(st.WorldState, &r.st); err != nil {
				return fmt.Errorf("thread %s: world state %s: %w", r.n.ID, st.WorldState, err)
			}
		}
		calls := map[string]string{} // call id -> key
		for _, item := range st.History {
			var it struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
				Key    string `json:"idempotency_key"`
			}
			if json.Unmarshal(item, &it) != nil {
				continue
			}
			switch it.Type {
			case "function_call":
				if it.Key != "" {
					calls[it.CallID] = it.Key
					r.logged[it.Key] = true
				}
			case "function_call_output":
				if k, ok := calls[it.CallID]; ok {
					r.settled[k] = true
				}
			}
		}
		for _, f := range res.Findings {
			k := f.Question.IdempotencyKey
			if f.Question.CallID == "" || k == "" {
				continue
			}
			switch f.Answer.Outcome {
			case agent.Executed:
				r.settled[k] = true
			case agent.NotExecuted:
				r.proven[k] = f.Question.CallID
			}
		}
	}
	if r.st.Thread != r.n.ID { // inherited (a fork): its own turns start at the fork
		r.st = worldState{Thread: r.n.ID, Rollout: r.th.Rollout(), Turn: r.n.Base, Plan: "A"}
	}
	d, err := r.th.Deliveries(ctx)
	if err != nil {
		return err
	}
	for _, s := range d.Sent {
		r.sent[s.IdempotencyKey]++
	}
	for i := range d.Received {
		r.received(d.Received[i])
	}
	r.needRepair = true
	return nil
}

// received notes one receipt: the first of a key is the one acted on.
func (r *threadRun) received(m agent.Received) {
	switch {
	case m.IdempotencyKey == taskKey(r.n.ID) && r.task == nil:
		r.task = &m
	case m.IdempotencyKey == redoKey(r.n.ID) && r.redo == nil:
		r.redo = &m
	}
	r.got[m.IdempotencyKey] = true
}

// answered reports whether thread's answer to a task or redo key came.
func (r *threadRun) answered(k string) bool { return r.got["result:"+k] }

// status of a thread after its program ran.
type status int

const (
	waiting status = iota // for mail
	finished
)

// env is what a program needs of the process running it.
type env interface {
	point(name string) bool // a crash point; true: the process died here
	effect(thread, key string) agent.Effect
}

// errDied stops a program whose process died at a crash point.
var errDied = errors.New("simcrash: the process died")

// receive takes n messages (n is what the supervisor says waits).
func (r *threadRun) receive(ctx context.Context, n int) error {
	for range n {
		got, err := r.th.Receive(ctx, 1, 5*time.Second)
		if err != nil {
			return err
		}
		for _, m := range got {
			r.received(agent.Received{MsgID: m.MsgID, From: m.From, Kind: m.Kind, IdempotencyKey: m.IdempotencyKey, InReplyTo: m.InReplyTo})
		}
	}
	return nil
}

// step runs the thread's program as far as it goes without new mail.
func (r *threadRun) step(ctx context.Context, e env, c *agent.Client) (status, error) {
	if r.task == nil {
		return waiting, nil
	}
	if r.needRepair {
		if err := r.repair(ctx, e); err != nil {
			return waiting, err
		}
	}
	n := r.n
	if n.Redo != nil && r.redo != nil { // plan B
		if r.sent["result:"+redoKey(n.ID)] > 0 {
			return finished, nil
		}
		for r.st.Turn < n.RedoFrom+len(n.Redo)-1 {
			if err := r.turn(ctx, e, r.st.Turn+1, "B"); err != nil {
				return waiting, err
			}
		}
		if _, err := r.th.Send(ctx, agent.Outgoing{To: r.redo.From, Kind: agent.KindResult, Body: map[string]int{"turns": r.st.Turn},
			IdempotencyKey: "result:" + redoKey(n.ID), InReplyTo: r.redo.MsgID}); err != nil {
			return waiting, err
		}
		r.sent["result:"+redoKey(n.ID)]++
		return finished, nil
	}
	if r.sent["result:"+taskKey(n.ID)] > 0 {
		return finished, nil
	}
	if r.st.Rollout != r.th.Rollout() { // reverted under us: wait to be told what to do
		return waiting, nil
	}
	for r.st.Turn < n.Base+n.Work {
		if err := r.turn(ctx, e, r.st.Turn+1, "A"); err != nil {
			return waiting, err
		}
	}
	if err := r.spawnAll(ctx, e); err != nil {
		return waiting, err
	}
	if n.ResendTo != "" && r.sent[taskKey(n.ResendTo)] == 1 {
		if _, err := r.th.Send(ctx, agent.Outgoing{To: n.ResendTo, Kind: agent.KindTask, Body: map[string]string{"do": n.ResendTo, "again": "yes"},
			IdempotencyKey: taskKey(n.ResendTo)}); err != nil {
			return waiting, err
		}
		r.sent[taskKey(n.ResendTo)]++
	}
	for _, ch := range n.Children {
		if !r.answered(taskKey(ch)) {
			return waiting, nil
		}
	}
	if len(n.Children) > 0 && r.st.Turn < n.Base+n.Work+1 {
		if err := r.turn(ctx, e, r.st.Turn+1, "A"); err != nil {
			return waiting, err
		}
	}
	if _, err := r.th.Send(ctx, agent.Outgoing{To: r.task.From, Kind: agent.KindResult, Body: map[string]int{"turns": r.st.Turn},
		IdempotencyKey: "result:" + taskKey(n.ID), InReplyTo: r.task.MsgID}); err != nil {
		return waiting, err
	}
	r.sent["result:"+taskKey(n.ID)]++
	return finished, nil
}

// spawnAll spawns the children whose task is not in the log yet.
func (r *threadRun) spawnAll(ctx context.Context, e env) error {
	for _, ch := range r.n.Children {
		if r.sent[taskKey(ch)] > 0 {
			continue
		}
		if err := spawn(ctx, r.th, ch, r.paginated(ch)); err != nil {
			return err
		}
		r.sent[taskKey(ch)]++
		if e.point(PointAfterSpawn) {
			return errDied
		}
	}
	return nil
}

func (r *threadRun) paginated(thread string) bool { return r.plan.Nodes[thread].Paginated }

// spawn creates a child with its task; a child that exists already (a
// crash after its creation, before its task was logged) is sent the task.
func spawn(ctx context.Context, th *agent.Thread, child string, paginated bool) error {
	spec := agent.ThreadSpec{ID: child, Role: "worker"}
	if paginated {
		spec.HistoryMode = agent.Paginated
	}
	_, err := th.Spawn(ctx, spec, agent.Task{Body: map[string]string{"do": child}, IdempotencyKey: taskKey(child)})
	if errors.Is(err, agent.ErrThreadExists) {
		_, err = th.Send(ctx, agent.Outgoing{To: child, Kind: agent.KindTask, Body: map[string]string{"do": child}, IdempotencyKey: taskKey(child)})
	}
	return err
}

// turnLabel names turn n of plan for keys.
func turnLabel(n int, plan string) string {
	if plan == "B" {
		return fmt.Sprintf("%db", n)
	}
	return fmt.Sprint(n)
}

// callsOf is how many calls turn n of plan makes.
func (r *threadRun) callsOf(n int, plan string) int {
	if plan == "B" {
		return r.n.Redo[n-r.n.RedoFrom]
	}
	return r.n.Calls[n-r.n.Base-1]
}

// repair settles what a crash left: calls proven not executed are
// retried, planned calls of turns already counted that were never logged
// are made. One turn for all of them; none when nothing is left.
func (r *threadRun) repair(ctx context.Context, e env) error {
	type todo struct{ key, retry string }
	var work []todo
	plan := "A"
	if r.n.Redo != nil && r.redo != nil {
		plan = "B"
	}
	for n := 1; n <= r.st.Turn; n++ {
		if (plan == "A" && n <= r.n.Base) || (plan == "B" && n < r.n.RedoFrom) {
			continue
		}
		if plan == "A" && n > r.n.Base+len(r.n.Calls) {
			break
		}
		for j := range r.callsOf(n, plan) {
			k := key(r.n.ID, turnLabel(n, plan), j)
			switch {
			case r.settled[k]:
			case r.proven[k] != "":
				work = append(work, todo{k, r.proven[k]})
			case !r.logged[k]:
				work = append(work, todo{k, ""})
			default:
				return fmt.Errorf("thread %s: call %s is unknown after the resume: nobody can settle it", r.n.ID, k)
			}
		}
	}
	r.needRepair = false
	if len(work) == 0 {
		return nil
	}
	turn, err := r.th.BeginTurn(ctx, agent.TurnSpec{ID: fmt.Sprintf("rp%do%d", r.st.Turn, r.opens), Context: turnContext, UserText: "settle what the crash left"})
	if err != nil {
		return err
	}
	for _, w := range work {
		spec := agent.CallSpec{ID: fmt.Sprintf("c%s-o%d", strings.TrimPrefix(w.key, r.n.ID), r.opens), Name: "apply", Arguments: `{"key":"` + w.key + `"}`, IdempotencyKey: w.key}
		if w.retry != "" {
			_, err = turn.RetryCall(ctx, w.retry, spec, e.effect(r.n.ID, w.key))
		} else {
			_, err = turn.Call(ctx, spec, e.effect(r.n.ID, w.key))
		}
		if err != nil {
			return err
		}
		r.settled[w.key] = true
	}
	return r.end(ctx, e, turn)
}

// turn runs work turn n of plan.
func (r *threadRun) turn(ctx context.Context, e env, n int, plan string) error {
	label := turnLabel(n, plan)
	turn, err := r.th.BeginTurn(ctx, agent.TurnSpec{ID: fmt.Sprintf("t%so%d", label, r.opens),
		Context: turnContext, UserText: "step " + label})
	if err != nil {
		return err
	}
	st := worldState{Thread: r.n.ID, Rollout: r.th.Rollout(), Turn: n, Plan: plan}
	if err := turn.World(ctx, true, st); err != nil {
		return err
	}
	r.st = st
	for j := range r.callsOf(n, plan) {
		k := key(r.n.ID, label, j)
		spec := agent.CallSpec{ID: fmt.Sprintf("c%s-o%d", strings.TrimPrefix(k, r.n.ID), r.opens), Name: "apply", Arguments: `{"key":"` + k + `"}`, IdempotencyKey: k}
		if _, err := turn.Call(ctx, spec, e.effect(r.n.ID, k)); err != nil {
			return err
		}
		r.logged[k], r.settled[k] = true, true
	}
	if err := turn.Message(ctx, "assistant", "done with step "+label); err != nil {
		return err
	}
	return r.end(ctx, e, turn)
}

// end ends a turn with the two barriers; the crash point is between them.
func (r *threadRun) end(ctx context.Context, e env, turn *agent.Turn) error {
	died := false
	err := turn.End(ctx, func(int64) { died = e.point(PointBetweenBarriers) })
	if died {
		return errDied
	}
	return err
}
