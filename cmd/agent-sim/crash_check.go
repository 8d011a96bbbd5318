package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree"
)

// checkStats are a round's measurements, each against ground truth kept
// outside the system: the world's ledger, the workers' --acks records and
// the tree's plan.
type checkStats struct {
	Acknowledged   int64          `json:"records_acknowledged"`
	Lost           int            `json:"records_lost"`
	SideEffects    int            `json:"side_effects"`
	ExecutedTwice  int            `json:"side_effects_executed_twice"`
	InFlight       int            `json:"calls_in_flight"` // found without an output at a resume: reported unknown
	Reconciled     int            `json:"calls_reconciled"`
	StillUnknown   int            `json:"calls_still_unknown"`
	Retried        int            `json:"calls_retried"`
	WronglyRetried int            `json:"calls_wrongly_retried"`
	Deliveries     map[string]int `json:"deliveries"`
	WantDeliveries map[string]int `json:"deliveries_ground_truth"`
	TreeEqual      bool           `json:"tree_equal"`
	FastEqNaive    bool           `json:"fast_equals_naive"`
	Ordered        bool           `json:"index_le_mirror_le_jetstream"`
}

// settleTimeout is how long the mirror may take to hold every record of a
// round's rollouts once the round's tree completed.
const settleTimeout = 30 * time.Second

// checkRound checks every DESIGN §8 invariant for one round's tree. An
// error means a check could not run (a failure too).
func checkRound(ctx context.Context, r *rig, pl *plan, driverID, driverRollout string) (checkStats, []string, error) {
	st := checkStats{TreeEqual: true, FastEqNaive: true, Ordered: true}
	var v []string
	fail := func(format string, a ...any) { v = append(v, fmt.Sprintf(format, a...)) }
	inRound := func(th string) bool { return th == driverID || th == pl.root || strings.HasPrefix(th, pl.root+"-") }

	// 2. No side effect executed twice: the world's ledger.
	l, err := r.wc.ledger(ctx)
	if err != nil {
		return st, nil, fmt.Errorf("world ledger: %w", err)
	}
	requests := map[string]int{}
	for _, e := range l.Effects {
		if !inRound(e.Thread) {
			continue
		}
		st.SideEffects++
		requests[e.Key] = e.Requests
		if e.Executions > 1 || e.Requests > 1 {
			st.ExecutedTwice++
			fail("side effect %s of %s: executed %d times, requested %d times (a world without its own dedupe would have run it twice)", e.Key, e.Thread, e.Executions, e.Requests)
		}
	}
	// The workers' own records: acknowledged ordinals, calls in flight, retries.
	acks, err := readAckLogs(r.acks)
	if err != nil {
		return st, nil, fmt.Errorf("acks: %w", err)
	}
	rollouts := map[string]string{driverID: driverRollout} // thread -> rollout
	type ack struct {
		ord   int64
		epoch uint64
	}
	acked := map[string][]ack{}
	outcome := map[string]string{}
	completed := map[string]int{} // msg id -> Receives that returned it (receipt logged, message acknowledged)
	inFlight := map[string]bool{}
	for _, e := range acks {
		if !inRound(e.Thread) {
			continue
		}
		switch e.T {
		case "ack":
			rollouts[e.Thread] = e.Rollout
			acked[e.Rollout] = append(acked[e.Rollout], ack{e.Ordinal, e.Epoch})
		case "resume":
			for _, k := range e.InFlight {
				inFlight[k] = true
			}
			for k, o := range e.Reconciled {
				if outcome[k] == "" || o != rollout.OutcomeUnknown {
					outcome[k] = o
				}
			}
		case "received":
			for _, m := range e.Msgs {
				completed[m]++
			}
		case "retry":
			st.Retried++
			if outcome[e.Key] != rollout.OutcomeNotExecuted || requests[e.Key] > 1 {
				st.WronglyRetried++
				fail("call %s of %s retried though no probe proved it not executed (probe said %q; the world was asked %d times)", e.Key, e.Thread, outcome[e.Key], requests[e.Key])
			}
		}
	}
	st.InFlight = len(inFlight)
	for k := range inFlight {
		if o := outcome[k]; o == rollout.OutcomeExecuted || o == rollout.OutcomeNotExecuted {
			st.Reconciled++
		}
	}
	for _, th := range pl.threads() {
		if rollouts[th] == "" {
			fail("thread %s: no worker recorded an acknowledged write", th)
		}
	}
	// 1. Nothing acknowledged is lost; 7. index <= mirror <= JetStream,
	// the mirror byte-equal to JetStream, once it has caught up.
	ids := make([]string, 0, len(rollouts))
	for _, rid := range rollouts {
		if rid != "" && !slices.Contains(ids, rid) {
			ids = append(ids, rid)
		}
	}
	sort.Strings(ids)
	bus := map[string][][]byte{}
	for _, rid := range ids {
		es, err := r.bus.ReadAll(ctx, rid, 1)
		if err != nil {
			return st, nil, fmt.Errorf("read rollout %s from the bus: %w", rid, err)
		}
		for _, a := range acked[rid] {
			if a.ord > int64(len(es)) || es[a.ord-1].Epoch != a.epoch {
				st.Lost++
				fail("rollout %s: ordinal %d was acknowledged (epoch %d) and JetStream holds %d records%s", rid, a.ord, a.epoch, len(es), epochNote(es, a.ord))
			}
		}
		var top int64
		for _, a := range acked[rid] {
			top = max(top, a.ord)
		}
		st.Acknowledged += top
		for _, e := range es {
			bus[rid] = append(bus[rid], append(slices.Clone(e.Record.Raw), '\n'))
		}
	}
	mirrored, order, err := settle(ctx, r, ids, bus)
	if err != nil {
		return st, nil, err
	}
	if len(order) > 0 {
		st.Ordered = false
		v = append(v, order...)
	}
	// The round's mirror files, as read, for replay and the tree.
	dir, err := os.MkdirTemp(r.dir, "check-")
	if err != nil {
		return st, nil, err
	}
	defer os.RemoveAll(dir)
	for _, rid := range ids {
		if err := os.WriteFile(filepath.Join(dir, rid+".jsonl"), mirrored[rid], 0o644); err != nil {
			return st, nil, err
		}
	}
	// 6. Fast replay equals naive; every call settled or reported.
	for _, rid := range ids {
		fast, naive, err := replayBoth(filepath.Join(dir, rid+".jsonl"))
		if err != nil {
			st.FastEqNaive = false
			fail("rollout %s: replay: %v", rid, err)
			continue
		}
		st.StillUnknown += len(fast.DanglingCalls)
		fast.Replay, naive.Replay = replay.Stats{}, replay.Stats{}
		fj, _ := json.Marshal(fast)
		nj, _ := json.Marshal(naive)
		if !bytes.Equal(fj, nj) {
			st.FastEqNaive = false
			fail("rollout %s: fast replay differs from naive:\n  fast  %.300s\n  naive %.300s", rid, fj, nj)
		}
	}
	// 4. Deliveries and 5. the tree.
	c, err := tree.LoadDir(dir)
	if err != nil {
		return st, nil, fmt.Errorf("load the round's rollouts: %w", err)
	}
	t := tree.Build(c, tree.Options{})
	want := map[string]string{driverID: ""}
	for _, th := range pl.threads() {
		want[th] = pl.parent(th, driverID)
	}
	got := map[string]string{}
	var walk func(ns []*tree.Node)
	walk = func(ns []*tree.Node) {
		for _, n := range ns {
			got[n.ThreadID] = n.ParentThreadID
			walk(n.Children)
		}
	}
	walk(t.Roots)
	if fmt.Sprint(edgeList(got)) != fmt.Sprint(edgeList(want)) || len(t.Orphans) > 0 || len(t.Problems) > 0 {
		st.TreeEqual = false
		fail("the tree rebuilt from the mirror is not the plan:\n  got  %v (orphans %v, problems %v)\n  want %v", edgeList(got), t.Orphans, t.Problems, edgeList(want))
	}
	// Ground truth: a task to and a result from every thread, each sent
	// once and received once; a message a receiver logged a receipt for and
	// then failed to acknowledge (it died, or the ack timed out) is
	// redelivered and its receipt logged again: possibly_duplicated is then
	// the truth, provided no two Receives returned it.
	st.Deliveries = map[string]int{}
	st.WantDeliveries = map[string]int{dedupe.Confirmed: 2 * len(pl.threads())}
	for _, d := range t.Deliveries {
		st.Deliveries[d.State]++
		if d.State == dedupe.PossiblyDuplicated && d.Receipts > 1 && completed[d.MsgID] <= 1 && d.Sends == 1 {
			st.WantDeliveries[dedupe.Confirmed]--
			st.WantDeliveries[dedupe.PossiblyDuplicated]++
		}
	}
	for _, s := range []string{dedupe.Confirmed, dedupe.Unconfirmed, dedupe.PossiblyDuplicated, dedupe.OrphanReceipt, dedupe.RolledBackReceipt} {
		if st.Deliveries[s] != st.WantDeliveries[s] {
			fail("deliveries %s: %d, ground truth %d", s, st.Deliveries[s], st.WantDeliveries[s])
		}
	}
	return st, v, nil
}

func epochNote(es []stream.Entry, ord int64) string {
	if ord <= int64(len(es)) {
		return fmt.Sprintf(", its ordinal %d written under epoch %d", ord, es[ord-1].Epoch)
	}
	return ""
}

func edgeList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, p := range m {
		out = append(out, p+">"+k)
	}
	sort.Strings(out)
	return out
}

// parent is a thread's parent in the plan (the driver for the root).
func (pl *plan) parent(th, driver string) string {
	if th == pl.root {
		return driver
	}
	return th[:strings.LastIndexByte(th, '-')]
}

// settle waits until the mirror holds every record JetStream holds for the
// round's rollouts, checking on every look that the index is no further
// than the mirror, the mirror no further than JetStream and byte-equal to
// it. It returns the mirror files' contents and the order violations.
func settle(ctx context.Context, r *rig, ids []string, bus map[string][][]byte) (map[string][]byte, []string, error) {
	deadline := time.Now().Add(settleTimeout)
	for {
		var v []string
		mirrored := map[string][]byte{}
		behind := ""
		ir, err := index.OpenReader(ctx, datadir.IndexPath(r.data))
		if err != nil && !errors.Is(err, index.ErrNoIndex) {
			return nil, nil, fmt.Errorf("index: %w", err)
		}
		for _, rid := range ids {
			raw, err := readMirror(r.data, rid)
			if err != nil {
				behind = fmt.Sprintf("rollout %s: %v", rid, err)
				continue
			}
			mirrored[rid] = raw
			lines := bytes.SplitAfter(raw, []byte("\n"))
			torn := false
			if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
				lines = lines[:n-1]
			} else if n > 0 { // a torn last line (a write cut short): repaired by the mirror, not yet
				lines, torn = lines[:n-1], true
			}
			want := bus[rid]
			if len(lines) > len(want) { // the bus may have grown since it was read
				es, err := r.bus.ReadAll(ctx, rid, 1)
				if err != nil {
					return nil, nil, fmt.Errorf("read rollout %s from the bus: %w", rid, err)
				}
				want = want[:0]
				for _, e := range es {
					want = append(want, append(slices.Clone(e.Record.Raw), '\n'))
				}
				bus[rid] = want
			}
			if len(lines) > len(want) {
				v = append(v, fmt.Sprintf("rollout %s: the mirror holds %d lines, JetStream %d (the mirror leads)", rid, len(lines), len(want)))
			}
			for i := range min(len(lines), len(want)) {
				if !bytes.Equal(lines[i], want[i]) {
					v = append(v, fmt.Sprintf("rollout %s: mirror line %d differs from JetStream's ordinal %d:\n  mirror %.200q\n  bus    %.200q", rid, i+1, i+1, lines[i], want[i]))
					break
				}
			}
			if len(lines) < len(want) || torn {
				behind = fmt.Sprintf("rollout %s: the mirror holds %d whole lines (a torn last line: %v), JetStream %d", rid, len(lines), torn, len(want))
			}
			if ir != nil {
				ro, found, err := ir.Rollout(ctx, rid)
				if err != nil {
					ir.Close()
					return nil, nil, fmt.Errorf("index: rollout %s: %w", rid, err)
				}
				if found && ro.WatermarkOrdinal > int64(len(lines)) {
					v = append(v, fmt.Sprintf("rollout %s: the index holds ordinal %d, the mirror %d lines (the index leads)", rid, ro.WatermarkOrdinal, len(lines)))
				}
			}
		}
		if ir != nil {
			ir.Close()
		}
		if len(v) > 0 {
			return mirrored, v, nil
		}
		if behind == "" {
			return mirrored, nil, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return mirrored, []string{fmt.Sprintf("not settled %s after the tree completed: %s", settleTimeout, behind)}, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readMirror reads a rollout's mirror file, plain or compressed; a file
// renamed away under the read (compressed meanwhile) is read again.
func readMirror(data, rid string) ([]byte, error) {
	var last error
	for range 5 {
		p := datadir.MirrorPath(data, rid)
		if p == "" {
			return nil, errors.New("no mirror file yet")
		}
		raw, err := readMaybeZst(p)
		if err == nil {
			return raw, nil
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return nil, last
}

func readMaybeZst(path string) ([]byte, error) {
	if !strings.HasSuffix(path, rollout.ZstExt) {
		return os.ReadFile(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return io.ReadAll(dec)
}

// replayBoth replays a rollout file fast and naive.
func replayBoth(path string) (*replay.State, *replay.State, error) {
	log, err := rollout.OpenFile(path)
	if err != nil {
		return nil, nil, err
	}
	fast, err := replay.Fast(log, replay.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("fast: %w", err)
	}
	naive, err := replay.Naive(log, replay.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("naive: %w", err)
	}
	return fast, naive, nil
}
