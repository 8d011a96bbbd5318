package agent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/agent"
)

// TestWorkerRestartedUnderSameIDHandsThreadsOver: a worker that dies
// mid-turn right after taking a thread, and is restarted at once under the
// same id (as a process supervisor restarts it), leaves no heartbeat gap
// and perhaps no sweep that saw it hold the thread; yet the thread is
// offered (the new process's heartbeat carries the old one's threads as
// orphaned) and the new incarnation resumes it. Before, the thread waited
// forever (found by agent-sim crash --seed 1, worker:after_effect).
func TestWorkerRestartedUnderSameIDHandsThreadsOver(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	sup := supervisor(t, b)
	inTurn := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	dying := connect(t, b, "w1-old")
	runWorker(t, dying, agent.WorkerSpec{ID: "w1"}, func(ctx context.Context, th *agent.Thread, _ *agent.Resumed) error {
		if _, err := th.Receive(ctx, 10, time.Second); err != nil {
			return err
		}
		turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1"})
		if err != nil {
			return err
		}
		_, err = turn.Call(ctx, agent.CallSpec{ID: "c1", Name: "apply", IdempotencyKey: "k1"}, func(context.Context) (string, error) {
			close(inTurn) // the call is logged and flushed
			<-release     // the process dies mid-call
			return "", errors.New("never")
		})
		return err
	})
	pc := connect(t, b, "parent")
	root, err := pc.StartRoot(ctx, agent.ThreadSpec{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close(ctx)
	if _, err := root.Spawn(ctx, agent.ThreadSpec{ID: "kid"}, agent.Task{Body: "work"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inTurn:
	case <-ctx.Done():
		t.Fatal("the first worker never ran the child")
	}
	dying.Close() // at once: no sweep may have seen the old process hold kid
	got := make(chan *agent.Resumed, 1)
	again := connect(t, b, "w1-new")
	runWorker(t, again, agent.WorkerSpec{ID: "w1"}, func(ctx context.Context, th *agent.Thread, res *agent.Resumed) error {
		if th.ID() == "kid" {
			select {
			case got <- res:
			default:
			}
		}
		return nil
	})
	select {
	case res := <-got:
		if res.Aborted != "t1" {
			t.Errorf("resume aborted %q, want the stale turn t1", res.Aborted)
		}
	case <-time.After(again.LeaseTTL() + 10*time.Second):
		t.Fatalf("the restarted worker was never offered the dead incarnation's thread (supervisor %+v)", sup.Stats())
	}
}

// TestFailedHandlerRunsAgain: a handler that takes the thread's task and
// then fails (as when an ack times out under a coordinator restart) leaves
// no mail and a live worker, so nothing would make the thread runnable
// again; the worker offers it again and the handler runs a second time.
// Before, the thread stayed as it was forever (found by agent-sim crash
// --seed 20261203, round 126, coordinator-kill).
func TestFailedHandlerRunsAgain(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	supervisor(t, b)
	runs := make(chan int32, 4)
	var n atomic.Int32
	w := connect(t, b, "w1")
	runWorker(t, w, agent.WorkerSpec{ID: "w1"}, func(ctx context.Context, th *agent.Thread, _ *agent.Resumed) error {
		if th.ID() != "kid" {
			return nil
		}
		if _, err := th.Receive(ctx, 10, time.Second); err != nil {
			return err
		}
		k := n.Add(1)
		runs <- k
		if k == 1 {
			return errors.New("a bus call timed out")
		}
		return nil
	})
	pc := connect(t, b, "parent")
	root, err := pc.StartRoot(ctx, agent.ThreadSpec{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close(ctx)
	if _, err := root.Spawn(ctx, agent.ThreadSpec{ID: "kid"}, agent.Task{Body: "work"}); err != nil {
		t.Fatal(err)
	}
	for want := int32(1); want <= 2; want++ {
		select {
		case got := <-runs:
			if got != want {
				t.Fatalf("run %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the handler ran %d times; a failed thread must run again", want-1)
		}
	}
}
