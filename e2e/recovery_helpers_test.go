package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// What the recovery tests (recovery_*_test.go) read back through the
// coordinator's --json outputs and the world's ledger file.

// shownState is the part of `coordinator show --json` the recovery tests
// look at.
type shownState struct {
	ThreadID  string `json:"thread_id"`
	RolloutID string `json:"rollout_id"`
	Turns     []struct {
		TurnID string `json:"turn_id"`
		Status string `json:"status"`
		Reason string `json:"reason"`
	} `json:"turns"`
	DanglingCalls []shownCall `json:"dangling_calls"`
}

type shownCall struct {
	CallID         string `json:"call_id"`
	Name           string `json:"name"`
	IdempotencyKey string `json:"idempotency_key"`
	TurnID         string `json:"turn_id"`
}

// turn returns the status and reason of turn id ("" when it is not in the
// window).
func (s shownState) turn(id string) (status, reason string) {
	for _, u := range s.Turns {
		if u.TurnID == id {
			return u.Status, u.Reason
		}
	}
	return "", ""
}

// show runs `coordinator show THREAD --data DIR --json`.
func (b *simBus) show(t testing.TB, thread string) (shownState, error) {
	t.Helper()
	var s shownState
	out, err := b.coordinator(t, "show", thread, "--data", b.data, "--json")
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		return s, fmt.Errorf("show --json: %v\n%s", err, out)
	}
	return s, nil
}

// nodes runs `coordinator tree --data DIR --json` and returns every node by
// thread id.
func (b *simBus) nodes(t testing.TB) (map[string]treeNode, error) {
	t.Helper()
	out, err := b.coordinator(t, "tree", "--data", b.data, "--json")
	if err != nil {
		return nil, err
	}
	var tr struct {
		Roots []treeNode `json:"roots"`
	}
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		return nil, fmt.Errorf("tree --json: %v\n%s", err, out)
	}
	all := map[string]treeNode{}
	var walk func([]treeNode)
	walk = func(ns []treeNode) {
		for _, n := range ns {
			all[n.ThreadID] = n
			walk(n.Children)
		}
	}
	walk(tr.Roots)
	return all, nil
}

// childResult is one entry of `coordinator unconfirmed --json`'s
// child_results.
type childResult struct {
	Parent string `json:"parent_thread"`
	Child  string `json:"child_thread"`
	State  string `json:"state"`
}

// unconfirmedResults runs `coordinator unconfirmed --data DIR --json`.
func (b *simBus) unconfirmedResults(t testing.TB) ([]childResult, error) {
	t.Helper()
	out, err := b.coordinator(t, "unconfirmed", "--data", b.data, "--json")
	if err != nil {
		return nil, err
	}
	var u struct {
		ChildResults []childResult `json:"child_results"`
	}
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		return nil, fmt.Errorf("unconfirmed --json: %v\n%s", err, out)
	}
	return u.ChildResults, nil
}

// worldEffect is one effect in the world's ledger file.
type worldEffect struct {
	Key        string `json:"key"`
	Thread     string `json:"thread"`
	Executions int    `json:"executions"`
	Requests   int    `json:"requests"`
}

// readLedger reads the world's ledger file (JSON lines, each effect's later
// line superseding its earlier ones): the ground truth kept outside the
// system under test. The world fsyncs a line before it answers, so a line
// being written is not yet an answered effect: a last line without its
// newline is left out.
func readLedger(path string) (map[string]worldEffect, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the world's ledger: %w", err)
	}
	if i := bytes.LastIndexByte(raw, '\n'); i+1 < len(raw) {
		raw = raw[:i+1]
	}
	out := map[string]worldEffect{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		var line struct {
			Effect *worldEffect `json:"effect"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("the world's ledger %s line %d: %w", path, n, err)
		}
		if line.Effect != nil {
			out[line.Effect.Key] = *line.Effect
		}
	}
	return out, sc.Err()
}

func mustLedger(t testing.TB, path string) map[string]worldEffect {
	t.Helper()
	l, err := readLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mirrorRecord is one line of a mirror file, its payload decoded far enough
// for the recovery tests.
type mirrorRecord struct {
	Ordinal int64  `json:"ordinal"`
	Type    string `json:"type"`
	Payload struct {
		Type           string `json:"type"`
		CallID         string `json:"call_id"`
		IdempotencyKey string `json:"idempotency_key"`
		Outcome        string `json:"outcome"`
		By             string `json:"by"`
		Evidence       string `json:"evidence"`
	} `json:"payload"`
}

// readMirror reads a rollout's mirror file (plain or compressed).
func (b *simBus) readMirror(rolloutID string) ([]mirrorRecord, error) {
	base := filepath.Join(b.data, "rollouts", rolloutID+".jsonl")
	raw, err := os.ReadFile(base)
	if os.IsNotExist(err) {
		raw, err = decompress(base + ".zst")
	}
	if err != nil {
		return nil, fmt.Errorf("mirror file of %s: %w", rolloutID, err)
	}
	var out []mirrorRecord
	for i, line := range bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n")) {
		var r mirrorRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("mirror file of %s line %d: %w", rolloutID, i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (b *simBus) mirrorRecords(t testing.TB, rolloutID string) []mirrorRecord {
	t.Helper()
	recs, err := b.readMirror(rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// pendingRun is an `agent-sim run` going on in the background.
type pendingRun struct {
	done chan struct{}
	sum  simSummary
	err  error
}

// startRun starts `agent-sim run --json` in the background; wait returns its
// summary, failing the test (on the test's goroutine) if it failed.
func (b *simBus) startRun(t testing.TB, args ...string) *pendingRun {
	t.Helper()
	sim := agentSimBin(t)
	r := &pendingRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		cmd := exec.Command(sim, append([]string{"run", "--nats", b.url, "--json", "--timeout", "3m"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			r.err = fmt.Errorf("agent-sim run: %v\n%s\n%s", err, out.String(), errb.String())
			return
		}
		if err := json.Unmarshal(out.Bytes(), &r.sum); err != nil {
			r.err = fmt.Errorf("agent-sim run --json: %v\n%s", err, out.String())
		}
	}()
	return r
}

func (r *pendingRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait waits for the run and fails the test if it failed.
func (r *pendingRun) wait(t testing.TB, b *simBus) simSummary {
	t.Helper()
	<-r.done
	if r.err != nil {
		t.Fatalf("%v\nworld: %s\nserve: %s", r.err, b.world.stderr, lastLines(b.serve.stderr.String(), 20))
	}
	return r.sum
}

// checkAcknowledged: no acknowledged record is lost. Each thread's writer
// reported the last ordinal it was told was acknowledged (the ground truth's
// records); its current rollout's mirror file must hold the records 1 to at
// least that, in order (verify --data then holds the mirror to JetStream).
func (b *simBus) checkAcknowledged(t testing.TB, s simSummary) {
	t.Helper()
	var last string
	if !poll(30*time.Second, func() bool {
		nodes, err := b.nodes(t)
		if err != nil {
			last = err.Error()
			return false
		}
		for _, th := range s.Truth {
			n, ok := nodes[th.Thread]
			if !ok || n.RolloutID == "" {
				last = "no rollout for " + th.Thread
				return false
			}
			recs, err := b.readMirror(n.RolloutID)
			if err != nil {
				last = err.Error()
				return false
			}
			for i, r := range recs {
				if r.Ordinal != int64(i+1) {
					last = fmt.Sprintf("%s: line %d holds ordinal %d", th.Thread, i+1, r.Ordinal)
					return false
				}
			}
			if int64(len(recs)) < th.Records || th.Records == 0 {
				last = fmt.Sprintf("%s: the mirror holds %d records, %d were acknowledged", th.Thread, len(recs), th.Records)
				return false
			}
		}
		return true
	}) {
		t.Fatalf("acknowledged records missing: %s", last)
	}
}
