package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// TestWorkersLists: `workers` lists live heartbeats with their threads,
// as a table and as JSON, and a stopped worker as stopping.
func TestWorkersLists(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bus")
	}
	tb := streamtest.New(t, streamtest.Options{LeaseTTL: 30 * time.Second})
	url := tb.Server.ClientURL()
	empty := runCLI(t, "workers", "--nats", url)
	empty.wantCode(t, exitOK)
	if !strings.Contains(empty.stdout, "No live workers.") {
		t.Errorf("no workers: %q", empty.stdout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, w := range []stream.WorkerInfo{
		{ID: "w1", Host: "h1", PID: 11, Capacity: 4, Threads: []string{"a", "b"}},
		{ID: "w2", Host: "h2", PID: 22, Capacity: 1, Stopped: true},
	} {
		if err := tb.Heartbeat(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	table := runCLI(t, "workers", "--nats", url)
	table.wantCode(t, exitOK)
	for _, want := range []string{"WORKER", "w1", "2/4 a,b", "live", "w2", "0/1", "stopping"} {
		if !strings.Contains(table.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, table.stdout)
		}
	}
	js := runCLI(t, "workers", "--nats", url, "--json")
	js.wantCode(t, exitOK)
	var got struct {
		Workers []workerJSON `json:"workers"`
	}
	dec := json.NewDecoder(strings.NewReader(js.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("workers --json: %v\n%s", err, js.stdout)
	}
	if len(got.Workers) != 2 || got.Workers[0].ID != "w1" || len(got.Workers[0].Threads) != 2 || got.Workers[1].State != "stopping" ||
		got.Workers[1].Threads == nil || got.Workers[0].Heartbeat == "" {
		t.Errorf("workers --json: %+v", got.Workers)
	}
	runCLI(t, "workers", "extra", "--nats", url).wantCode(t, exitUsage)
}
