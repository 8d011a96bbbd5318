package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/agent"
)

// The simulated outside world is a service on the bus (NATS request/reply,
// outside Logbook's streams): it executes side effects by idempotency key,
// keeps the ledger of what it executed in its own file (never in the
// coordinator's data dir), answers probes, and collects each thread's report
// of what it did. Its ledger is the ground truth the simulator checks the
// system against.
const (
	subjExec   = "sim.world.exec"
	subjProbe  = "sim.world.probe"
	subjReport = "sim.world.report"
	subjLedger = "sim.world.ledger"
)

type execReq struct {
	Key    string `json:"key"`
	Thread string `json:"thread"`
	Op     string `json:"op"`
}

type execResp struct {
	Executed bool   `json:"executed"` // false: already executed, by an earlier request
	Result   string `json:"result"`
	Error    string `json:"error,omitempty"`
}

// effect is one side effect in the world's ledger.
type effect struct {
	Key        string `json:"key"`
	Thread     string `json:"thread"`
	Op         string `json:"op"`
	Executions int    `json:"executions"` // times the world carried it out: never more than 1
	Requests   int    `json:"requests"`   // times it was asked to
	At         string `json:"at"`
}

// report is what a simulated thread says it did, sent when it is done.
type report struct {
	Thread  string       `json:"thread"`
	Parent  string       `json:"parent"`
	Turns   int          `json:"turns"`
	Records int64        `json:"records"`
	Keys    []string     `json:"keys"`
	Sent    []reportSent `json:"sent"`
}

type reportSent struct {
	MsgID string `json:"msg_id"`
	Kind  string `json:"kind"`
	To    string `json:"to"`
}

type ledger struct {
	Effects []effect `json:"effects"`
	Reports []report `json:"reports"`
}

type world struct {
	mu      sync.Mutex
	effects map[string]*effect
	reports map[string]report
	file    *os.File
}

// openWorld loads a ledger file (JSON lines: effects and reports, later
// lines superseding earlier ones) and keeps appending to it.
func openWorld(path string) (*world, error) {
	w := &world{effects: map[string]*effect{}, reports: map[string]report{}}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("world ledger: %w", err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		var rec struct {
			Effect *effect `json:"effect"`
			Report *report `json:"report"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			f.Close()
			return nil, fmt.Errorf("world ledger %s line %d: %w", path, line, err)
		}
		if rec.Effect != nil {
			w.effects[rec.Effect.Key] = rec.Effect
		}
		if rec.Report != nil {
			w.reports[rec.Report.Thread] = *rec.Report
		}
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, fmt.Errorf("world ledger %s: %w", path, err)
	}
	w.file = f
	return w, nil
}

// persist appends a ledger line and fsyncs it before the world answers.
func (w *world) persist(v any) error {
	b, _ := json.Marshal(v)
	if _, err := w.file.Write(append(b, '\n')); err != nil {
		return err
	}
	return w.file.Sync()
}

func (w *world) exec(r execReq) execResp {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.effects[r.Key]
	if !ok {
		e = &effect{Key: r.Key, Thread: r.Thread, Op: r.Op, At: time.Now().UTC().Format(time.RFC3339Nano)}
		w.effects[r.Key] = e
	}
	e.Requests++
	first := e.Executions == 0
	if first {
		e.Executions = 1
	}
	if err := w.persist(struct {
		Effect *effect `json:"effect"`
	}{e}); err != nil {
		return execResp{Error: err.Error()}
	}
	return execResp{Executed: first, Result: "done " + r.Key}
}

func (w *world) probe(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.effects[key]
	return ok && e.Executions > 0
}

func (w *world) report(r report) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reports[r.Thread] = r
	return w.persist(struct {
		Report report `json:"report"`
	}{r})
}

func (w *world) ledger() ledger {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := ledger{Effects: []effect{}, Reports: []report{}}
	for _, e := range w.effects {
		l.Effects = append(l.Effects, *e)
	}
	for _, r := range w.reports {
		l.Reports = append(l.Reports, r)
	}
	sort.Slice(l.Effects, func(i, j int) bool { return l.Effects[i].Key < l.Effects[j].Key })
	sort.Slice(l.Reports, func(i, j int) bool { return l.Reports[i].Thread < l.Reports[j].Thread })
	return l
}

// serveWorld answers the world's subjects on nc until ctx ends. The
// subscriptions are a queue group, so several world processes sharing one
// ledger file are not supported: run one.
func serveWorld(ctx context.Context, nc *nats.Conn, w *world) error {
	reply := func(m *nats.Msg, v any) {
		b, _ := json.Marshal(v)
		m.Respond(b)
	}
	handlers := map[string]nats.MsgHandler{
		subjExec: func(m *nats.Msg) {
			var r execReq
			if json.Unmarshal(m.Data, &r) != nil || r.Key == "" {
				reply(m, execResp{Error: "bad exec request"})
				return
			}
			reply(m, w.exec(r))
		},
		subjProbe: func(m *nats.Msg) {
			var r execReq
			if json.Unmarshal(m.Data, &r) != nil || r.Key == "" {
				reply(m, map[string]any{"error": "bad probe request"})
				return
			}
			reply(m, map[string]bool{"executed": w.probe(r.Key)})
		},
		subjReport: func(m *nats.Msg) {
			var r report
			if json.Unmarshal(m.Data, &r) != nil || r.Thread == "" {
				reply(m, map[string]string{"error": "bad report"})
				return
			}
			if err := w.report(r); err != nil {
				reply(m, map[string]string{"error": err.Error()})
				return
			}
			reply(m, map[string]bool{"ok": true})
		},
		subjLedger: func(m *nats.Msg) { reply(m, w.ledger()) },
	}
	for subj, h := range handlers {
		sub, err := nc.QueueSubscribe(subj, "world", h)
		if err != nil {
			return fmt.Errorf("world: subscribe %s: %w", subj, err)
		}
		defer sub.Unsubscribe()
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("world: %w", err)
	}
	<-ctx.Done()
	return nil
}

// worldClient is how agents reach the world.
type worldClient struct {
	nc      *nats.Conn
	timeout time.Duration
}

func (c *worldClient) request(ctx context.Context, subj string, req, resp any) error {
	b, _ := json.Marshal(req)
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	m, err := c.nc.RequestWithContext(rctx, subj, b)
	if err != nil {
		return err
	}
	return json.Unmarshal(m.Data, resp)
}

// exec asks the world to carry out an effect. A request that got no answer
// may or may not have been carried out: ErrOutcomeUnknown.
func (c *worldClient) exec(ctx context.Context, r execReq) (string, error) {
	var resp execResp
	if err := c.request(ctx, subjExec, r, &resp); err != nil {
		return "", fmt.Errorf("world exec %s: %w: %w", r.Key, agent.ErrOutcomeUnknown, err)
	}
	if resp.Error != "" {
		return "", fmt.Errorf("world exec %s: %w: %s", r.Key, agent.ErrOutcomeUnknown, resp.Error)
	}
	return resp.Result, nil
}

// Probe is the reconcile Prober: the world's ledger says whether a keyed
// effect was carried out.
func (c *worldClient) Probe(ctx context.Context, q agent.Question) (agent.Answer, error) {
	if q.IdempotencyKey == "" {
		return agent.Answer{}, fmt.Errorf("%w: the world knows effects by idempotency key", agent.ErrNotAsked)
	}
	var resp struct {
		Executed *bool  `json:"executed"`
		Error    string `json:"error"`
	}
	if err := c.request(ctx, subjProbe, execReq{Key: q.IdempotencyKey}, &resp); err != nil || resp.Executed == nil {
		return agent.Answer{}, fmt.Errorf("%w: world probe %s: %v %s", agent.ErrNotAsked, q.IdempotencyKey, err, resp.Error)
	}
	a := agent.Answer{Outcome: agent.NotExecuted, By: "probe:world", Evidence: "the world's ledger has no execution of " + q.IdempotencyKey}
	if *resp.Executed {
		a = agent.Answer{Outcome: agent.Executed, By: "probe:world", Evidence: "the world's ledger records " + q.IdempotencyKey + " as executed"}
	}
	return a, nil
}

func (c *worldClient) report(ctx context.Context, r report) error {
	var resp struct {
		Error string `json:"error"`
	}
	if err := c.request(ctx, subjReport, r, &resp); err != nil {
		return err
	}
	if resp.Error != "" {
		return errors.New(resp.Error)
	}
	return nil
}

func (c *worldClient) ledger(ctx context.Context) (ledger, error) {
	var l ledger
	err := c.request(ctx, subjLedger, struct{}{}, &l)
	return l, err
}
