package simcrash

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/logbook-agents/logbook/agent"
)

// World is the outside world of one scenario, kept outside the system
// under test: it carries out effects by idempotency key and answers
// probes. It does not deduplicate: every request that reaches it is an
// execution (a payment sent twice is paid twice), so its ledger shows any
// effect an agent had carried out twice.
type World struct {
	mu    sync.Mutex
	execs map[string]int // key -> executions
	first []string       // keys in the order first executed
}

// NewWorld returns an empty world.
func NewWorld() *World { return &World{execs: map[string]int{}} }

// exec carries an effect out.
func (w *World) exec(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.execs[key] == 0 {
		w.first = append(w.first, key)
	}
	w.execs[key]++
}

// executed reports whether key was carried out.
func (w *World) executed(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.execs[key] > 0
}

// Ledger returns every key with its execution count, sorted.
func (w *World) Ledger() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.execs))
	for k, n := range w.execs {
		out[k] = n
	}
	return out
}

// Keys returns the executed keys, sorted.
func (w *World) Keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.execs))
	for k := range w.execs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// prober is the world's status probe as one process sees it: a dead
// process asks nobody.
type prober struct {
	w     *World
	alive func() bool
}

var _ agent.Prober = prober{}

// Probe answers from the world's ledger, by idempotency key.
func (p prober) Probe(_ context.Context, q agent.Question) (agent.Answer, error) {
	if !p.alive() {
		return agent.Answer{}, fmt.Errorf("%w: the process is dead", agent.ErrNotAsked)
	}
	if q.IdempotencyKey == "" || q.CallID == "" {
		return agent.Answer{}, fmt.Errorf("%w: the world knows calls by idempotency key", agent.ErrNotAsked)
	}
	if p.w.executed(q.IdempotencyKey) && !lyingProbe.Load() {
		return agent.Answer{Outcome: agent.Executed, By: "probe:world", Evidence: "the world's ledger records " + q.IdempotencyKey}, nil
	}
	return agent.Answer{Outcome: agent.NotExecuted, By: "probe:world", Evidence: "the world's ledger has no " + q.IdempotencyKey}, nil
}
