package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// GCRollout is a rollout gc looked at.
type GCRollout struct {
	ID     string `json:"rollout_id"`
	Thread string `json:"thread_id"`
	Reason string `json:"reason"` // why it goes, or why it stays
}

// GCResult lists what gc removed (or, in a dry run, would remove) and what
// it kept that a careless gc might have taken.
type GCResult struct {
	Removed []GCRollout `json:"removed"`
	Kept    []GCRollout `json:"kept"`
	DryRun  bool        `json:"dry_run"`
	// SkippedPacks counts damaged or foreign messages on the bus gc read past.
	SkippedPacks int `json:"skipped_packs"`
}

// rolloutFacts is what gc knows of one rollout, from the bus or the mirror.
type rolloutFacts struct {
	thread     string
	sealed     bool
	references []string // rollouts its history_base or fork_copy names
	onBus      bool
	files      []string
	unreadable string // why gc could not tell what this rollout is: it stays
	successor  string // the rollout its rollout_sealed names
}

// GC removes old rollouts nothing refers to: sealed ones (replaced by a
// revert) and abandoned revert attempts (their thread points elsewhere), when
// no rollout's history_base or fork_copy names them. References are checked
// against JetStream and the mirror files, never the (lagging) index. A
// removed rollout is purged from the bus and its mirror files deleted.
func GC(ctx context.Context, bus *stream.Bus, mirrorDir string, dryRun bool) (*GCResult, error) {
	facts := map[string]*rolloutFacts{}
	skippedPacks := 0
	get := func(id string) *rolloutFacts {
		if facts[id] == nil {
			facts[id] = &rolloutFacts{}
		}
		return facts[id]
	}
	info, err := bus.StreamInfo(ctx, stream.StreamRollouts, jetstream.WithSubjectFilter(stream.RolloutSubject(">")))
	if err != nil {
		return nil, err
	}
	for subj := range info.State.Subjects {
		id := strings.TrimPrefix(subj, stream.RolloutSubject(""))
		f := get(id)
		f.onBus = true
		meta, skipped, err := firstMeta(ctx, bus, id)
		skippedPacks += skipped
		if errors.Is(err, errNoMeta) {
			f.unreadable = "no readable session_meta on the bus"
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ops: gc: rollout %s on the bus: %w", id, err)
		}
		f.thread, f.references = meta.ID, references(meta)
		last, _, err := bus.LastRecord(ctx, id)
		var pe *stream.PackError
		switch {
		case errors.As(err, &pe):
			skippedPacks++
			f.unreadable = "its last message on the bus is damaged (" + pe.Error() + ")"
		case err != nil:
			return nil, fmt.Errorf("ops: gc: rollout %s on the bus: %w", id, err)
		}
		f.sealed = last.Type == rollout.TypeEventMsg && last.EventKind() == rollout.EventRolloutSealed
		if f.sealed {
			f.successor, _ = rollout.LookupString(last.Payload, "successor_rollout_id")
		}
	}
	if mirrorDir != "" {
		if err := mirrorFacts(mirrorDir, get); err != nil {
			return nil, err
		}
	}
	referenced := map[string]string{}
	for id, f := range facts {
		for _, r := range f.references {
			referenced[r] = id
		}
	}
	pointers := map[string]string{}
	// A pointer gc could not read would make a current rollout look
	// abandoned: a failed read fails gc.
	keys, err := bus.Threads().ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("ops: gc: list THREADS: %w", err)
	}
	for k := range keys.Keys() {
		e, err := bus.Threads().Get(ctx, k)
		switch {
		case err == nil:
			pointers[k] = string(e.Value())
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		default:
			return nil, fmt.Errorf("ops: gc: THREADS %s: %w", k, err)
		}
	}
	res := &GCResult{DryRun: dryRun, SkippedPacks: skippedPacks}
	ids := make([]string, 0, len(facts))
	for id := range facts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		f := facts[id]
		cur, hasPointer := pointers[f.thread]
		switch {
		case f.unreadable != "":
			res.Kept = append(res.Kept, GCRollout{id, f.thread, "unreadable: " + f.unreadable})
		case referenced[id] != "" && (f.sealed || hasPointer && cur != id):
			res.Kept = append(res.Kept, GCRollout{id, f.thread, "old, but rollout " + referenced[id] + " references it"})
		case referenced[id] != "":
		case f.sealed:
			res.Removed = append(res.Removed, GCRollout{id, f.thread, "sealed (replaced by a revert), referenced by nothing"})
		case hasPointer && cur != id && f.thread != "":
			res.Removed = append(res.Removed, GCRollout{id, f.thread, "not the current rollout of " + f.thread + " (an abandoned revert), referenced by nothing"})
		}
	}
	keepChains(res, facts)
	if dryRun {
		return res, nil
	}
	for _, r := range res.Removed {
		f := facts[r.ID]
		if f.onBus {
			if err := bus.PurgeRollout(ctx, r.ID); err != nil {
				return res, fmt.Errorf("ops: gc: %w", err)
			}
		}
		for _, p := range f.files {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return res, fmt.Errorf("ops: gc: %w", err)
			}
		}
	}
	return res, nil
}

// keepChains keeps every rollout a reader reaches by following seals from a
// rollout that stays: removing the middle of a chain (two chained reverts)
// would leave the first one sealed in favour of nothing.
func keepChains(res *GCResult, facts map[string]*rolloutFacts) {
	removed := map[string]int{}
	for i, r := range res.Removed {
		removed[r.ID] = i
	}
	for changed := true; changed; {
		changed = false
		for id, f := range facts {
			if _, gone := removed[id]; gone || f.successor == "" {
				continue
			}
			if i, ok := removed[f.successor]; ok {
				r := res.Removed[i]
				r.Reason = "on the seal chain of rollout " + id + ", which stays"
				res.Kept = append(res.Kept, r)
				delete(removed, f.successor)
				changed = true
			}
		}
	}
	out := res.Removed[:0]
	for _, r := range res.Removed {
		if _, ok := removed[r.ID]; ok {
			out = append(out, r)
		}
	}
	res.Removed = out
	sort.Slice(res.Kept, func(i, j int) bool { return res.Kept[i].ID < res.Kept[j].ID })
}

func references(m rollout.SessionMeta) []string {
	var out []string
	if m.HistoryBase != nil {
		out = append(out, m.HistoryBase.RolloutID)
	}
	if m.ForkCopy != nil {
		out = append(out, m.ForkCopy.RolloutID)
	}
	return out
}

var errNoMeta = errors.New("ops: gc: no session_meta")

// firstMeta reads a rollout's canonical session_meta from the bus, skipping
// (and counting) damaged messages before it.
func firstMeta(ctx context.Context, bus *stream.Bus, id string) (rollout.SessionMeta, int, error) {
	r, err := bus.ReadRollout(ctx, id, 1)
	if err != nil {
		return rollout.SessionMeta{}, 0, err
	}
	defer r.Close()
	skipped := 0
	for {
		e, err := r.Next(ctx)
		var pe *stream.PackError
		if errors.As(err, &pe) {
			skipped++
			continue // Next has moved past it
		}
		if errors.Is(err, io.EOF) {
			return rollout.SessionMeta{}, skipped, errNoMeta
		}
		if err != nil {
			return rollout.SessionMeta{}, skipped, err
		}
		if e.Record.Type == rollout.TypeSessionMeta {
			m, err := rollout.Decode[rollout.SessionMeta](&e.Record)
			return m, skipped, err
		}
	}
}

// mirrorFacts adds what the mirror's files say.
func mirrorFacts(dir string, get func(string) *rolloutFacts) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, de := range ents {
		name := de.Name()
		id := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, ".broken"), rollout.ZstExt), ".jsonl")
		if id == name || rollout.ValidateID("rollout id", id) != nil {
			continue
		}
		f := get(id)
		path := filepath.Join(dir, name)
		f.files = append(f.files, path)
		if strings.HasSuffix(name, ".broken") {
			continue
		}
		log, err := rollout.OpenFile(path)
		if err != nil {
			return fmt.Errorf("ops: gc: mirror file %s: %w", path, err)
		}
		m, succ, err := fileFacts(log)
		if err != nil {
			return fmt.Errorf("ops: gc: mirror file %s: %w", path, err)
		}
		if f.thread == "" {
			f.thread = m.ID
		}
		f.references = append(f.references, references(m)...)
		if succ != "" {
			f.sealed, f.successor = true, succ
		}
	}
	return nil
}

// fileFacts reads a mirror file's session_meta and, when its last record
// seals it, the successor it names. Damaged lines are skipped; any other read
// error is returned.
func fileFacts(log rollout.Log) (rollout.SessionMeta, string, error) {
	var meta rollout.SessionMeta
	cur, err := log.Forward(0)
	if err != nil {
		return meta, "", err
	}
	err = rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		if e.Type != rollout.TypeSessionMeta {
			return true, nil
		}
		m, err := rollout.Decode[rollout.SessionMeta](&e.Record)
		if err != nil {
			return true, nil
		}
		meta = m
		return false, nil
	})
	if err != nil {
		return meta, "", err
	}
	back, err := log.Backward()
	if err != nil {
		return meta, "", err
	}
	succ := ""
	err = rollout.Scan(back, nil, func(e rollout.Entry) (bool, error) {
		if e.Type == rollout.TypeEventMsg && e.EventKind() == rollout.EventRolloutSealed {
			succ, _ = rollout.LookupString(e.Payload, "successor_rollout_id")
		}
		return false, nil
	})
	return meta, succ, err
}
