package tree

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Rollout is one rollout as the corpus read it: identity, lineage and the
// physical records the ledger and the tree need.
type Rollout struct {
	ID, Thread string
	Log        rollout.Log
	Meta       rollout.SessionMeta
	Successor  string // rollout_sealed: the rollout that replaced this one
	Records    int
	Damaged    int
	Title      string // the first user message (a user_message event, else a user message item that is not injected context)
	titleEvent bool   // Title came from a user_message event
	Created    string // timestamp of the first record
	Updated    string // timestamp of the last record
	Spawns     []Spawn
	Messages   []Message
	BadIDs     []string // records skipped for an invalid ID, one line each (rollout.CheckEventIDs)
	metaEnd    int64    // byte offset just past the canonical session_meta
	walked     *walked  // the replay of this rollout as its own view, made by LoadDir (nil: none)
}

// Spawn is a thread_spawned record: the parent's record of a child.
type Spawn struct {
	Child, Role string
	Ordinal     int64
}

// Message is an inter_agent_sent, inter_agent_received or reconciled{msg_id}
// record.
type Message struct {
	Kind    string // the event kind
	Ordinal int64  // the record's ordinal (its line in a version-0 rollout)
	Sent    rollout.InterAgentSent
	Recv    rollout.InterAgentReceived
	Note    rollout.Reconciled
}

// Problem is something wrong with the input that does not stop the tree from
// being built.
type Problem struct {
	Kind    string `json:"kind"` // unreadable, duplicate_rollout, duplicate_thread, cycle, conflicting_parent, bad_base, invalid_id
	Thread  string `json:"thread_id,omitempty"`
	Rollout string `json:"rollout_id,omitempty"`
	Detail  string `json:"detail"`
}

// Corpus is a set of rollouts: a directory of rollout files (a Codex sessions
// tree, a data dir's mirror) or what the index names.
type Corpus struct {
	Rollouts map[string]*Rollout
	Problems []Problem
	Warnings []string                   // what LoadDir skipped, one line each
	origins  map[string][]dedupe.Origin // viewOrigins cache
}

// NewCorpus returns an empty corpus.
func NewCorpus() *Corpus { return &Corpus{Rollouts: map[string]*Rollout{}} }

// IsRolloutFile reports whether a file name is a rollout: .jsonl or .jsonl.zst.
func IsRolloutFile(name string) bool {
	return strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".jsonl"+rollout.ZstExt)
}

// RolloutFiles lists the rollout files under dir, recursively, sorted. What
// cannot be read as one is skipped with a one-line warning and the walk goes
// on: a sub-directory that cannot be listed, and a name that is not a regular
// file once symlinks are resolved (a FIFO, a device, /dev/zero, a dangling
// link or a loop), which would otherwise block or never end. Only an
// unreadable dir itself is an error.
func RolloutFiles(dir string, warn func(path, why string)) ([]string, error) {
	if warn == nil {
		warn = func(string, string) {}
	}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			warn(p, unwrapped(err).Error())
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !IsRolloutFile(d.Name()) {
			return nil
		}
		st, err := os.Stat(p)
		switch {
		case err != nil:
			warn(p, unwrapped(err).Error())
		case !st.Mode().IsRegular():
			warn(p, fmt.Sprintf("not a regular file (%s)", st.Mode().Type()))
		default:
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	return paths, nil
}

// unwrapped drops the *fs.PathError around err (the path is said already).
func unwrapped(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// LoadDir reads every rollout file under dir, recursively (RolloutFiles:
// what it skips is in Warnings). Files that are not rollouts, or cannot be
// read, become problems. Files are read on every core and added in path
// order, so the corpus is the same as one read file by file.
func LoadDir(dir string) (*Corpus, error) {
	c := NewCorpus()
	paths, err := RolloutFiles(dir, func(p, why string) { c.Warnings = append(c.Warnings, "skipping "+p+": "+why) })
	if err != nil {
		return nil, err
	}
	type read struct {
		r   *Rollout
		err error
	}
	reads := make([]read, len(paths))
	parallel(len(paths), func(i int) { reads[i].r, reads[i].err = loadFile(paths[i]) })
	for _, rd := range reads {
		if rd.err != nil {
			c.Problems = append(c.Problems, Problem{Kind: "unreadable", Detail: rd.err.Error()})
			continue
		}
		c.add(rd.r)
	}
	return c, nil
}

// loadFile reads one rollout file, once: the tape of its lines gives the
// corpus its records and, when the rollout is its own view (no
// history_base) and not sealed, is replayed for the thread it will most
// likely be the current rollout of (Threads uses that replay then).
func loadFile(path string) (*Rollout, error) {
	f, err := rollout.OpenFile(path)
	if err != nil {
		return nil, err
	}
	t, err := record(f)
	if err != nil {
		return nil, err
	}
	r, err := readRollout(t)
	if err != nil {
		return nil, err
	}
	r.Log = f
	if r.Meta.HistoryBase == nil && r.Successor == "" {
		r.walked = walkView(t, []Leaf{{Rollout: r.ID, End: -1}}, map[string]bool{r.ID: true})
	}
	return r, nil
}

// Add reads one rollout into the corpus.
func (c *Corpus) Add(log rollout.Log) error {
	r, err := readRollout(log)
	if err != nil {
		return err
	}
	c.add(r)
	return nil
}

// add puts a rollout read by readRollout into the corpus.
func (c *Corpus) add(r *Rollout) {
	if old, ok := c.Rollouts[r.ID]; ok {
		c.Problems = append(c.Problems, Problem{Kind: "duplicate_rollout", Rollout: r.ID, Thread: r.Thread,
			Detail: fmt.Sprintf("rollout %s is in both %s and %s; kept the first", r.ID, old.Log.Name(), r.Log.Name())})
		return
	}
	c.Rollouts[r.ID] = r
	for _, d := range r.BadIDs {
		c.Problems = append(c.Problems, Problem{Kind: "invalid_id", Rollout: r.ID, Thread: r.Thread, Detail: d})
	}
}

func readRollout(log rollout.Log) (*Rollout, error) {
	cur, err := log.Forward(0)
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	r := &Rollout{Log: log}
	haveMeta := false
	for {
		e, err := cur.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var ce *rollout.CorruptionError
		if errors.As(err, &ce) {
			if !ce.Torn() {
				r.Damaged++
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", log.Name(), err)
		}
		r.Records++
		if r.Created == "" {
			r.Created = e.Timestamp
		}
		r.Updated = e.Timestamp
		ord := e.Ordinal
		if ord == 0 {
			ord = int64(e.Line)
		}
		if !haveMeta {
			if e.Type != rollout.TypeSessionMeta {
				continue
			}
			m, err := rollout.Decode[rollout.SessionMeta](&e.Record)
			if err == nil {
				err = m.Validate()
			}
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %w", log.Name(), e.Line, err)
			}
			r.Meta, r.ID, r.Thread, r.metaEnd = m, m.Rollout(), m.ID, e.End()
			haveMeta = true
			continue
		}
		if e.Type == rollout.TypeResponseItem && r.Title == "" {
			if it, err := rollout.Decode[rollout.ResponseItem](&e.Record); err == nil && it.Type == rollout.ItemMessage && it.Role == "user" {
				if text := it.Text(); text != "" && !replay.IsContextual(text) {
					r.Title = text
				}
			}
		}
		if e.Type != rollout.TypeEventMsg {
			continue
		}
		kind := e.EventKind()
		switch kind {
		case rollout.EventThreadSpawned, rollout.EventRolloutSealed, rollout.EventInterAgentSent,
			rollout.EventInterAgentReceived, rollout.EventReconciled:
			if err := rollout.CheckEventIDs(&e.Record); err != nil {
				r.BadIDs = append(r.BadIDs, fmt.Sprintf("%s line %d ordinal %d: %s: %v", log.Name(), e.Line, ord, kind, err))
				continue
			}
		}
		switch kind {
		case rollout.EventUserMessage:
			if !r.titleEvent {
				if m, ok := rollout.LookupString(e.Payload, "message"); ok && m != "" {
					r.Title, r.titleEvent = m, true
				}
			}
		case rollout.EventThreadSpawned:
			if s, err := rollout.Decode[rollout.ThreadSpawned](&e.Record); err == nil && rollout.ValidateID("child_thread_id", s.ChildThreadID) == nil {
				r.Spawns = append(r.Spawns, Spawn{Child: s.ChildThreadID, Role: s.AgentRole, Ordinal: ord})
			}
		case rollout.EventRolloutSealed:
			if s, err := rollout.Decode[rollout.RolloutSealed](&e.Record); err == nil {
				r.Successor = s.SuccessorRolloutID
			}
		case rollout.EventInterAgentSent:
			if m, err := rollout.Decode[rollout.InterAgentSent](&e.Record); err == nil && m.MsgID != "" {
				r.Messages = append(r.Messages, Message{Kind: kind, Ordinal: ord, Sent: m})
			}
		case rollout.EventInterAgentReceived:
			if m, err := rollout.Decode[rollout.InterAgentReceived](&e.Record); err == nil && m.MsgID != "" {
				r.Messages = append(r.Messages, Message{Kind: kind, Ordinal: ord, Recv: m})
			}
		case rollout.EventReconciled:
			if m, err := rollout.Decode[rollout.Reconciled](&e.Record); err == nil && m.MsgID != "" {
				r.Messages = append(r.Messages, Message{Kind: kind, Ordinal: ord, Note: m})
			}
		}
	}
	if !haveMeta {
		return nil, fmt.Errorf("%s: %w", log.Name(), rollout.ErrNoSessionMeta)
	}
	return r, nil
}

// Leaf is a piece of a view: a byte range of one rollout's file, at a
// virtual offset in the view.
type Leaf struct {
	Rollout    string
	Start, End int64 // virtual; End -1 for the open last leaf
	From       int64 // the file offset the range starts at
}

// View returns the log a rollout is read as: itself, or — when it has a
// history_base — its session_meta, the frozen prefix of the base's view, then
// its own records. The leaves say which rollout each byte range comes from.
func (c *Corpus) View(id string) (rollout.Log, []Leaf, error) {
	segs, leaves, err := c.segments(id)
	if err != nil {
		return nil, nil, err
	}
	r := c.Rollouts[id]
	if len(segs) == 1 && segs[0].From == 0 && segs[0].To < 0 {
		return r.Log, []Leaf{{Rollout: id, End: -1}}, nil
	}
	j, err := rollout.NewJoined(r.Log.Name(), segs...)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Leaf, len(leaves))
	for i, v := range j.Segments() {
		out[i] = Leaf{Rollout: leaves[i].Rollout, Start: v[0], End: v[1], From: segs[i].From}
	}
	return j, out, nil
}

// Locate says where a position of a rollout's view (the offset of a record,
// or the view's end) lies: the rollout it falls in, the ordinal of the record
// there (one past the last for the end), and its offset in that rollout's
// file. A history_base made of it reproduces the view's prefix.
func (c *Corpus) Locate(id string, viewOff int64) (string, int64, int64, error) {
	view, leaves, err := c.View(id)
	if err != nil {
		return "", 0, 0, err
	}
	cur, err := view.Forward(0)
	if err != nil {
		return "", 0, 0, err
	}
	li := 0
	var last rollout.Entry
	var hit *rollout.Entry
	err = rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		for li+1 < len(leaves) && e.Offset >= leaves[li+1].Start {
			li++
		}
		switch {
		case e.Offset == viewOff:
			hit = &e
			return false, nil
		case e.Offset > viewOff:
			return false, fmt.Errorf("rollout %s: view offset %d is not a record start", id, viewOff)
		}
		last = e
		return true, nil
	})
	if err != nil {
		return "", 0, 0, err
	}
	if hit != nil {
		l := leaves[li]
		return l.Rollout, hit.Ordinal, l.From + hit.Offset - l.Start, nil
	}
	if last.Size == 0 || last.End() != viewOff {
		return "", 0, 0, fmt.Errorf("rollout %s: view offset %d is beyond the view", id, viewOff)
	}
	l := leaves[li]
	return l.Rollout, last.Ordinal + 1, l.From + last.End() - l.Start, nil
}

// segments flattens a rollout's view (rollout.ViewSegments over the corpus).
func (c *Corpus) segments(id string) ([]rollout.Segment, []Leaf, error) {
	segs, ids, err := rollout.ViewSegments(id, func(id string) (rollout.Head, error) {
		r, ok := c.Rollouts[id]
		if !ok {
			return rollout.Head{}, fmt.Errorf("rollout %s is not here", id)
		}
		return rollout.Head{Log: r.Log, HistoryBase: r.Meta.HistoryBase, MetaEnd: r.metaEnd}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	leaves := make([]Leaf, len(ids))
	for i, id := range ids {
		leaves[i] = Leaf{Rollout: id}
	}
	return segs, leaves, nil
}
