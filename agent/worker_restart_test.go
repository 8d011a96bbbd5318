package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/agent"
)

// TestWorkerRestartedUnderSameIDHandsThreadsOver: a worker that dies
// mid-turn and is restarted at once under the same id (as a process
// supervisor restarts it) gets no heartbeat gap, yet the threads the dead
// process held are offered: the new incarnation resumes the thread. Before
// the supervisor compared incarnations, the thread waited forever (found by
// agent-sim crash --seed 1, worker:after_effect).
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
		if _, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1"}); err != nil {
			return err
		}
		close(inTurn)
		<-release // the process dies mid-turn
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
	select {
	case <-inTurn:
	case <-ctx.Done():
		t.Fatal("the first worker never ran the child")
	}
	time.Sleep(300 * time.Millisecond) // the supervisor sees the old incarnation holding kid
	dying.Close()
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
