package agent_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/agent"
	"github.com/logbook-agents/logbook/internal/stream"
)

// exampleBus stands in for `coordinator serve`: an embedded JetStream set
// up as the coordinator sets it up. It returns the URL agents connect to.
func exampleBus() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "logbook-example-")
	if err != nil {
		log.Fatal(err)
	}
	ns, err := stream.StartServer(stream.ServerConfig{StoreDir: dir, Listen: "127.0.0.1:0", Fsync: stream.FsyncInterval,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := stream.Setup(ctx, js, stream.SetupConfig{LeaseTTL: time.Second}); err != nil {
		log.Fatal(err)
	}
	return ns.ClientURL(), func() { ns.Shutdown(); ns.WaitForShutdown(); os.RemoveAll(dir) }
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A root agent runs one turn with a side effect, spawns a child with a
// task, and a worker process runs the child and sends its result back.
func Example() {
	url, stop := exampleBus()
	defer stop()
	ctx := context.Background()

	c, err := agent.Connect(ctx, url, agent.Options{Name: "planner", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	root, err := c.StartRoot(ctx, agent.ThreadSpec{ID: "root", Role: "planner"})
	if err != nil {
		log.Fatal(err)
	}
	turn, err := root.BeginTurn(ctx, agent.TurnSpec{Context: agent.TurnContext{Model: "m1"}, UserText: "ship v2"})
	if err != nil {
		log.Fatal(err)
	}
	// The function_call is on the bus before the effect runs.
	out, err := turn.Call(ctx, agent.CallSpec{Name: "tag", Arguments: `{"tag":"v2"}`, IdempotencyKey: "tag-v2"},
		func(ctx context.Context) (string, error) { return "tagged v2", nil })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("call:", out)
	child, err := root.Spawn(ctx, agent.ThreadSpec{ID: "build", Role: "builder"}, agent.Task{Body: "build v2"})
	if err != nil {
		log.Fatal(err)
	}
	if err := turn.End(ctx, nil); err != nil {
		log.Fatal(err)
	}

	// A worker (any process, any machine) opens the child and does the task.
	w, err := agent.Connect(ctx, url, agent.Options{Name: "worker-1", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	kid, _, err := w.Open(ctx, child.ID, agent.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	tasks, err := kid.Receive(ctx, 1, 5*time.Second)
	if err != nil || len(tasks) != 1 {
		log.Fatal(tasks, err)
	}
	fmt.Printf("child got a %s from %s: %s\n", tasks[0].Kind, tasks[0].From, tasks[0].Body)
	if _, err := kid.Reply(ctx, tasks[0], "built"); err != nil {
		log.Fatal(err)
	}
	kid.Close(ctx)

	results, err := root.Receive(ctx, 1, 5*time.Second)
	if err != nil || len(results) != 1 {
		log.Fatal(results, err)
	}
	fmt.Printf("root got a %s: %s\n", results[0].Kind, results[0].Body)
	root.Close(ctx)
	// Output:
	// call: tagged v2
	// child got a task from root: "build v2"
	// root got a result: "built"
}

// After a crash, Open resumes the thread: the turn that never ended is
// aborted and a call without a result is reported unknown, never re-run.
func ExampleClient_Open() {
	url, stop := exampleBus()
	defer stop()
	ctx := context.Background()

	dead, _ := agent.Connect(ctx, url, agent.Options{Name: "dead", Logger: quiet})
	th, _ := dead.StartRoot(ctx, agent.ThreadSpec{ID: "payer"})
	turn, _ := th.BeginTurn(ctx, agent.TurnSpec{ID: "t1", UserText: "pay the invoice"})
	turn.StartCall(ctx, agent.CallSpec{ID: "pay-1", Name: "pay", IdempotencyKey: "invoice-42"})
	dead.Close()                                       // the process dies during the payment
	time.Sleep(dead.LeaseTTL() + 200*time.Millisecond) // its lease expires

	c, _ := agent.Connect(ctx, url, agent.Options{Name: "heir", Logger: quiet})
	defer c.Close()
	th, res, err := c.Open(ctx, "payer", agent.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer th.Close(ctx)
	fmt.Println("aborted turn:", res.Aborted)
	for _, call := range res.Unknown {
		fmt.Printf("unknown: %s %s (key %s)\n", call.CallID, call.Name, call.IdempotencyKey)
	}
	// Output:
	// aborted turn: t1
	// unknown: pay-1 pay (key invoice-42)
}
