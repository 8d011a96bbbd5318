package ops

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// agent writes a thread on the bus as an agent harness would.
type agent struct {
	t      *testing.T
	bus    *stream.Bus
	thread string
	lease  *stream.Lease
	w      *stream.Writer
	b      rollout.Builder
}

// newAgent creates a thread (THREADS entry, lease, writer, session_meta).
func newAgent(t *testing.T, bus *stream.Bus, thread, rid, mode string) *agent {
	t.Helper()
	ctx := ctxT(t)
	lease, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: "agent-" + thread})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.OpenWriter(ctx, lease, rid, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Threads().Create(ctx, thread, []byte(rid)); err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, bus: bus, thread: thread, lease: lease, w: w}
	a.add(a.b.Meta(rollout.SessionMeta{ID: thread, RolloutID: rid, Source: rollout.Source{Kind: "sim"}, Cwd: "/repo", HistoryMode: mode}))
	return a
}

func (a *agent) add(recs ...rollout.Record) *agent {
	a.t.Helper()
	for _, r := range recs {
		r.Ordinal = 0
		if _, err := a.w.Append(context.Background(), r); err != nil {
			a.t.Fatal(err)
		}
	}
	return a
}

// turn writes a whole user turn: start, message, settings, items, end.
func (a *agent) turn(id string, done bool) *agent {
	a.add(a.b.TaskStarted(id), a.b.UserMessage("please "+id),
		a.b.TurnContext(rollout.TurnContext{TurnID: id, Model: "model-" + id, ApprovalPolicy: "on-request"}),
		a.b.Message("user", "please "+id), a.b.Message("assistant", "did "+id))
	if done {
		a.add(a.b.TaskComplete(id))
	}
	return a
}

func (a *agent) flush() *agent {
	a.t.Helper()
	if err := a.w.Flush(context.Background()); err != nil {
		a.t.Fatal(err)
	}
	return a
}

// stop closes the writer and releases the lease: the thread goes idle.
func (a *agent) stop() {
	a.t.Helper()
	a.flush()
	if err := a.w.Close(context.Background()); err != nil {
		a.t.Fatal(err)
	}
	if err := a.lease.Release(context.Background()); err != nil {
		a.t.Fatal(err)
	}
}

func newBus(t *testing.T) *streamtest.Bus { return streamtest.New(t, streamtest.Options{}) }

// texts lists the history's message texts, role-prefixed.
func texts(st *replay.State) []string {
	var out []string
	for _, h := range st.History {
		var it rollout.ResponseItem
		if json.Unmarshal(h, &it) == nil && it.Type == rollout.ItemMessage {
			out = append(out, it.Role+":"+it.Text())
		}
	}
	return out
}

func turnStatus(st *replay.State) map[string]string {
	out := map[string]string{}
	for _, t := range st.Turns {
		out[t.TurnID] = t.Status
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
