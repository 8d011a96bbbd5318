package tree

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// scene writes small rollouts into a directory, the way the coordinator's
// mirror would hold them.
type scene struct {
	t   *testing.T
	dir string
	now time.Time
}

func newScene(t *testing.T) *scene {
	return &scene{t: t, dir: t.TempDir(), now: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
}

// thread starts a rollout; records are appended with its methods.
type thread struct {
	s    *scene
	b    rollout.Builder
	id   string
	rid  string
	recs []rollout.Record
}

func (s *scene) thread(id, rid string, meta rollout.SessionMeta) *thread {
	th := &thread{s: s, id: id, rid: rid}
	th.b.Now = func() time.Time { s.now = s.now.Add(time.Second); return s.now }
	meta.ID, meta.RolloutID, meta.Cwd = id, rid, "/repo"
	if meta.Source.Kind == "" {
		meta.Source.Kind = "sim"
	}
	th.recs = append(th.recs, th.b.Meta(meta))
	return th
}

func (th *thread) add(r ...rollout.Record) *thread { th.recs = append(th.recs, r...); return th }

func (th *thread) turn(id string) *thread {
	return th.add(th.b.TaskStarted(id), th.b.UserMessage("do "+id))
}

func (th *thread) done(id string) *thread { return th.add(th.b.TaskComplete(id)) }

func (th *thread) send(msg, key, to, kind, replyTo string) *thread {
	return th.add(th.b.Event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: msg, IdempotencyKey: key,
		ToThread: to, Kind: kind, InReplyTo: replyTo}))
}

func (th *thread) recv(msg, key, from, kind, replyTo string) *thread {
	return th.add(th.b.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: msg, IdempotencyKey: key,
		FromThread: from, Kind: kind, InReplyTo: replyTo}))
}

func (th *thread) spawn(child string) *thread {
	return th.add(th.b.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: child}))
}

func (th *thread) rollback(n int64) *thread { return th.add(th.b.RolledBack(n)) }

func (th *thread) sealed(successor string) *thread {
	return th.add(th.b.Event(rollout.RolloutSealed{Type: rollout.EventRolloutSealed, SuccessorRolloutID: successor}))
}

// bytes returns the rollout's JSONL.
func (th *thread) bytes() []byte { return rollout.MemOf(th.rid, th.recs).Bytes() }

// write saves the rollout as <rid>.jsonl.
func (th *thread) write() *thread {
	th.s.t.Helper()
	if err := os.WriteFile(filepath.Join(th.s.dir, th.rid+".jsonl"), th.bytes(), 0o644); err != nil {
		th.s.t.Fatal(err)
	}
	return th
}

// prefix returns the end ordinal (exclusive) and byte offset of th's first n
// records.
func (th *thread) prefix(n int) (int64, int64) {
	lines := bytes.SplitAfter(th.bytes(), []byte("\n"))
	var off int64
	for _, l := range lines[:n] {
		off += int64(len(l))
	}
	return int64(n + 1), off
}

// forkCopy starts a thread forked from th by copy of its first n records.
func (s *scene) forkCopy(id, rid string, from *thread, n int) *thread {
	end, off := from.prefix(n)
	child := s.thread(id, rid, rollout.SessionMeta{ForkedFromID: from.id,
		ForkCopy: &rollout.HistoryPosition{RolloutID: from.rid, EndOrdinalExclusive: end, EndByteOffset: off}})
	for _, r := range from.recs[:n] {
		c := r.Reenvelope(child.b.Next)
		child.b.Next++
		child.recs = append(child.recs, c)
	}
	return child
}

// forkRef starts a thread forked from th by reference to its first n records.
func (s *scene) forkRef(id, rid string, from *thread, n int) *thread {
	end, off := from.prefix(n)
	return s.thread(id, rid, rollout.SessionMeta{ForkedFromID: from.id,
		HistoryBase: &rollout.HistoryPosition{RolloutID: from.rid, EndOrdinalExclusive: end, EndByteOffset: off}})
}

// revert starts a new rollout of th's thread whose history ends before its
// record n (1-based), and seals th.
func (s *scene) revert(from *thread, rid string, n int) *thread {
	end, off := from.prefix(n - 1)
	next := s.thread(from.id, rid, rollout.SessionMeta{HistoryMode: rollout.HistoryPaginated, ParentThreadID: from.recsMeta().ParentThreadID,
		HistoryBase: &rollout.HistoryPosition{RolloutID: from.rid, EndOrdinalExclusive: end, EndByteOffset: off}})
	from.sealed(rid)
	return next
}

func (th *thread) recsMeta() rollout.SessionMeta {
	m, err := rollout.Decode[rollout.SessionMeta](&th.recs[0])
	if err != nil {
		th.s.t.Fatal(err)
	}
	return m
}

func (s *scene) build() *Tree {
	s.t.Helper()
	c, err := LoadDir(s.dir)
	if err != nil {
		s.t.Fatal(err)
	}
	return Build(c, Options{})
}
