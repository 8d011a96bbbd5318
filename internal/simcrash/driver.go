package simcrash

import (
	"errors"
	"fmt"
	"strings"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// The driver D is the tree's root thread, held by the process: it spawns
// the tree's first agent and waits for its answer, and between answers it
// acts as the operator (`coordinator fork`, `coordinator revert`), through
// the process's own connection, so that a crash of the process is a crash
// of the operator too.

// drive runs D's program.
func (p *process) drive(d *threadRun) error {
	plan := p.r.plan
	if err := d.spawnAll(p.ctx, p); err != nil {
		return err
	}
	root := plan.Nodes[plan.D].Children[0]
	switch plan.Tree {
	case TreeFork:
		if !d.answered(taskKey(root)) {
			return nil
		}
		if err := p.fork(); err != nil {
			return err
		}
		if d.sent[taskKey(plan.Fork)] == 0 {
			if _, err := d.th.Send(p.ctx, agent.Outgoing{To: plan.Fork, Kind: agent.KindTask, Body: map[string]string{"do": plan.Fork},
				IdempotencyKey: taskKey(plan.Fork)}); err != nil {
				return err
			}
			d.sent[taskKey(plan.Fork)]++
		}
	case TreeRevert:
		if !d.answered(taskKey(root)) {
			return nil
		}
		if err := p.revert(); err != nil {
			return err
		}
		if d.sent[redoKey(root)] == 0 {
			if _, err := d.th.Send(p.ctx, agent.Outgoing{To: root, Kind: agent.KindMessage, Body: map[string]int{"redo_from_turn": plan.RevertBefore},
				IdempotencyKey: redoKey(root)}); err != nil {
				return err
			}
			d.sent[redoKey(root)]++
		}
	}
	return nil
}

// driverDone reports whether every answer D waits for came.
func (p *process) driverDone(d *threadRun) bool {
	plan := p.r.plan
	root := plan.Nodes[plan.D].Children[0]
	switch plan.Tree {
	case TreeFork:
		return d.answered(taskKey(root)) && d.answered(taskKey(plan.Fork))
	case TreeRevert:
		return d.answered(taskKey(root)) && d.answered(redoKey(root))
	}
	return d.answered(taskKey(root))
}

// turnID is the id of a thread's turn n (the last attempt of it).
func turnID(src *ops.Source, n int) (string, error) {
	_, spans, err := src.Timeline()
	if err != nil {
		return "", err
	}
	id := ""
	prefix := fmt.Sprintf("t%do", n)
	for _, s := range spans {
		if strings.HasPrefix(s.TurnID, prefix) && s.InEffect {
			id = s.TurnID
		}
	}
	if id == "" {
		return "", fmt.Errorf("thread %s has no turn %d in effect", src.Thread, n)
	}
	return id, nil
}

// fork forks the fork tree's source after its turn, unless the fork exists.
func (p *process) fork() error {
	plan := p.r.plan
	bus, err := p.opsBus()
	if err != nil {
		return err
	}
	if _, err := bus.Threads().Get(p.ctx, plan.Fork); err == nil {
		return nil
	}
	src, err := ops.Load(p.ctx, bus, plan.ForkOf)
	if err != nil {
		return err
	}
	after, err := turnID(src, plan.ForkAfter)
	if err != nil {
		return err
	}
	_, err = ops.Fork(p.ctx, bus, src, ops.ForkOptions{AfterTurn: after, Mode: plan.ForkMode, Thread: plan.Fork, Holder: p.name})
	return err
}

// revert reverts the revert tree's thread before its turn, unless that was
// done: its current rollout is then a successor with a history_base.
func (p *process) revert() error {
	plan := p.r.plan
	bus, err := p.opsBus()
	if err != nil {
		return err
	}
	src, err := ops.Load(p.ctx, bus, plan.RevertOf)
	if err != nil {
		return err
	}
	if src.Meta.HistoryBase != nil {
		return nil
	}
	before, err := turnID(src, plan.RevertBefore)
	if err != nil {
		return err
	}
	if err := p.release(plan.RevertOf); err != nil {
		return err
	}
	_, err = ops.Revert(p.ctx, bus, plan.RevertOf, before)
	if errors.Is(err, ops.ErrBadPosition) {
		return fmt.Errorf("revert %s before turn %s: %w", plan.RevertOf, before, err)
	}
	return err
}
