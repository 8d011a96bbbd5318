package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
	"github.com/logbook-agents/logbook/internal/supervise"
)

// supervisor runs the coordinator's supervision for the test.
func supervisor(t testing.TB, b *streamtest.Bus) *supervise.Supervisor {
	t.Helper()
	s := supervise.New(b.Connect(t), supervise.Options{Interval: 100 * time.Millisecond, Logger: quietLog})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// runWorker runs a worker until the test ends; its result is sent on the
// returned channel.
func runWorker(t *testing.T, c *agent.Client, spec agent.WorkerSpec, h agent.Handler) (<-chan error, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() { out <- c.RunWorker(ctx, spec, h) }()
	t.Cleanup(cancel)
	return out, cancel
}

// doTask is a child's handler: receive the task, answer it.
func doTask(ctx context.Context, th *agent.Thread, _ *agent.Resumed) error {
	mail, err := th.Receive(ctx, 10, 500*time.Millisecond)
	if err != nil {
		return err
	}
	for _, m := range mail {
		if m.Kind != agent.KindTask {
			continue
		}
		turn, err := th.BeginTurn(ctx, agent.TurnSpec{})
		if err != nil {
			return err
		}
		if err := turn.Message(ctx, "assistant", "done"); err != nil {
			return err
		}
		if err := turn.End(ctx, nil); err != nil {
			return err
		}
		if _, err := th.Reply(ctx, m, "done"); err != nil {
			return err
		}
	}
	return nil
}

// TestWorkersRunSpawnedChildren: children spawned by a root are offered by
// the supervisor and run by two workers, each child by exactly one; the
// root receives every result.
func TestWorkersRunSpawnedChildren(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	supervisor(t, b)
	var mu sync.Mutex
	ran := map[string][]string{} // child -> workers that ran it
	for _, id := range []string{"w1", "w2"} {
		c := connect(t, b, id)
		runWorker(t, c, agent.WorkerSpec{ID: id, Capacity: 2}, func(ctx context.Context, th *agent.Thread, res *agent.Resumed) error {
			mu.Lock()
			ran[th.ID()] = append(ran[th.ID()], id)
			mu.Unlock()
			return doTask(ctx, th, res)
		})
	}
	pc := connect(t, b, "parent")
	root, err := pc.StartRoot(ctx, agent.ThreadSpec{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close(ctx)
	const n = 6
	for i := range n {
		if _, err := root.Spawn(ctx, agent.ThreadSpec{ID: "kid" + string(rune('a'+i))}, agent.Task{Body: i}); err != nil {
			t.Fatal(err)
		}
	}
	results := 0
	for results < n && ctx.Err() == nil {
		got, err := root.Receive(ctx, n, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		results += len(got)
	}
	if results != n {
		t.Fatalf("root received %d results of %d", results, n)
	}
	mu.Lock()
	defer mu.Unlock()
	for kid, ws := range ran {
		if len(ws) != 1 {
			t.Errorf("%s was run %d times (%v); each task once", kid, len(ws), ws)
		}
	}
	if len(ran) != n {
		t.Errorf("%d children ran, want %d", len(ran), n)
	}
}

// TestWorkerDeathHandsThreadsOver: a worker that dies mid-call (its
// connection dropped, nothing released) stops heartbeating; the
// supervisor offers its thread to another worker, which resumes it: the
// stale turn is aborted and the call is unknown, never re-run. The handoff
// takes at most the lease TTL plus a few seconds.
func TestWorkerDeathHandsThreadsOver(t *testing.T) {
	b := testBus(t)
	ctx := testCtx(t)
	sup := supervisor(t, b)
	inCall := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	dying := connect(t, b, "dying")
	runWorker(t, dying, agent.WorkerSpec{ID: "dying"}, func(ctx context.Context, th *agent.Thread, _ *agent.Resumed) error {
		if _, err := th.Receive(ctx, 10, time.Second); err != nil {
			return err
		}
		turn, err := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1"})
		if err != nil {
			return err
		}
		_, err = turn.Call(ctx, agent.CallSpec{ID: "deploy1", Name: "deploy", IdempotencyKey: "rel-9"}, func(context.Context) (string, error) {
			close(inCall)
			<-release // the process dies during the effect
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
	if _, err := root.Spawn(ctx, agent.ThreadSpec{ID: "kid"}, agent.Task{Body: "deploy"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inCall:
	case <-ctx.Done():
		t.Fatal("the first worker never ran the child")
	}
	dying.Close()
	died := time.Now()

	type resumed struct {
		res *agent.Resumed
		at  time.Time
	}
	got := make(chan resumed, 1)
	heir := connect(t, b, "heir")
	runWorker(t, heir, agent.WorkerSpec{ID: "heir"}, func(ctx context.Context, th *agent.Thread, res *agent.Resumed) error {
		select {
		case got <- resumed{res, time.Now()}:
		default:
		}
		return nil
	})
	var r resumed
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatalf("nobody resumed the dead worker's thread (supervisor %+v)", sup.Stats())
	}
	handoff := r.at.Sub(died)
	t.Logf("handoff %v (lease TTL %v)", handoff, heir.LeaseTTL())
	if handoff > heir.LeaseTTL()+5*time.Second {
		t.Errorf("handoff took %v, more than the lease TTL + 5 s", handoff)
	}
	if r.res.Aborted != "t1" || len(r.res.Unknown) != 1 || r.res.Unknown[0].CallID != "deploy1" {
		t.Errorf("resume: aborted %q unknown %+v", r.res.Aborted, r.res.Unknown)
	}
	var calls int
	for _, e := range entries(t, b, "kid") {
		if strings.Contains(string(e.Payload), `"type":"function_call"`) {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("%d function_calls in the child; the call must never be re-run", calls)
	}
}
