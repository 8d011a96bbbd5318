package tree

import (
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// TestDeliveryClassification is the table: every row is a small tree
// of real rollout files, classified by the ledger.
func TestDeliveryClassification(t *testing.T) {
	const task, result = rollout.MsgTask, rollout.MsgResult
	parent := func(s *scene) *thread {
		return s.thread("P", "rP", rollout.SessionMeta{}).turn("p1").spawn("C").send("m1", "k1", "C", task, "")
	}
	child := func(s *scene) *thread {
		return s.thread("C", "rC", rollout.SessionMeta{ParentThreadID: "P"})
	}
	rows := []struct {
		name  string
		build func(s *scene)
		msg   string // the delivery to check, to its receiver
		to    string
		want  string
	}{
		{"sent, received once", func(s *scene) {
			parent(s).done("p1").write()
			child(s).turn("c1").recv("m1", "k1", "P", task, "").done("c1").write()
		}, "m1", "C", dedupe.Confirmed},
		{"sent, never received", func(s *scene) {
			parent(s).done("p1").write()
			child(s).write()
		}, "m1", "C", dedupe.Unconfirmed},
		{"sent, received twice", func(s *scene) {
			parent(s).done("p1").write()
			child(s).turn("c1").recv("m1", "k1", "P", task, "").done("c1").turn("c2").recv("m1", "k1", "P", task, "").done("c2").write()
		}, "m1", "C", dedupe.PossiblyDuplicated},
		{"two msg_ids, one idempotency key, both received", func(s *scene) {
			parent(s).send("m2", "k1", "C", task, "").done("p1").write()
			child(s).turn("c1").recv("m1", "k1", "P", task, "").recv("m2", "k1", "P", task, "").done("c1").write()
		}, "m2", "C", dedupe.PossiblyDuplicated},
		{"received, no send anywhere", func(s *scene) {
			s.thread("P", "rP", rollout.SessionMeta{}).turn("p1").spawn("C").done("p1").write()
			child(s).turn("c1").recv("m9", "k9", "P", task, "").done("c1").write()
		}, "m9", "C", dedupe.OrphanReceipt},
		{"received only in a turn the receiver rolled back", func(s *scene) {
			parent(s).done("p1").write()
			child(s).turn("c1").recv("m1", "k1", "P", task, "").done("c1").rollback(1).write()
		}, "m1", "C", dedupe.RolledBackReceipt},
		{"sent in a turn the sender rolled back, received once", func(s *scene) {
			parent(s).done("p1").rollback(1).write()
			child(s).turn("c1").recv("m1", "k1", "P", task, "").done("c1").write()
		}, "m1", "C", dedupe.Confirmed},
		{"received, then the receiver forked by copy after the receipt", func(s *scene) {
			parent(s).done("p1").write()
			c := child(s).turn("c1").recv("m1", "k1", "P", task, "").done("c1").write()
			s.forkCopy("F", "rF", c, len(c.recs)).turn("f1").done("f1").write()
		}, "m1", "C", dedupe.Confirmed},
		{"received, then the receiver forked by reference after the receipt", func(s *scene) {
			parent(s).done("p1").write()
			c := child(s).turn("c1").recv("m1", "k1", "P", task, "").done("c1").write()
			s.forkRef("F", "rF", c, len(c.recs)).turn("f1").done("f1").write()
		}, "m1", "C", dedupe.Confirmed},
		{"received, then the receiver reverted to before the receipt", func(s *scene) {
			parent(s).done("p1").write()
			c := s.thread("C", "rC1", rollout.SessionMeta{ParentThreadID: "P", HistoryMode: rollout.HistoryPaginated}).
				turn("c1").done("c1").turn("c2").recv("m1", "k1", "P", task, "").done("c2")
			before := len(c.recs) - 3 // the start of turn c2
			s.revert(c, "rC2", before).turn("c3").done("c3").write()
			c.write()
		}, "m1", "C", dedupe.RolledBackReceipt},
		{"re-sent under the same msg_id after a crash, received once", func(s *scene) {
			parent(s).send("m1", "k1", "C", task, "").done("p1").write()
			child(s).turn("c1").recv("m1", "k1", "P", task, "").done("c1").write()
		}, "m1", "C", dedupe.Confirmed},
		{"re-sent under the same msg_id after a crash, received twice", func(s *scene) {
			parent(s).send("m1", "k1", "C", task, "").done("p1").write()
			child(s).turn("c1").recv("m1", "k1", "P", task, "").done("c1").turn("c2").recv("m1", "k1", "P", task, "").done("c2").write()
		}, "m1", "C", dedupe.PossiblyDuplicated},
		{"a result received by the parent", func(s *scene) {
			parent(s).done("p1").turn("p2").recv("r1", "kr", "C", result, "m1").done("p2").write()
			child(s).turn("c1").recv("m1", "k1", "P", task, "").send("r1", "kr", "P", result, "m1").done("c1").write()
		}, "r1", "P", dedupe.Confirmed},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			s := newScene(t)
			row.build(s)
			tr := s.build()
			got := ""
			for _, d := range tr.Deliveries {
				if d.MsgID == row.msg && d.ToThread == row.to {
					got = d.State
					if got != row.want {
						t.Errorf("%s to %s: %s (%s), want %s", row.msg, row.to, got, d.Reason, row.want)
					}
				}
			}
			if got == "" {
				t.Fatalf("no delivery %s to %s in %+v", row.msg, row.to, tr.Deliveries)
			}
			if len(tr.Problems) > 0 {
				t.Errorf("problems: %+v", tr.Problems)
			}
		})
	}
}

// TestChildResults: a task whose child never answered and a result the
// parent never logged are both listed; a confirmed result is not.
func TestChildResults(t *testing.T) {
	s := newScene(t)
	s.thread("P", "rP", rollout.SessionMeta{}).turn("p1").spawn("A").spawn("B").spawn("C").
		send("tA", "kA", "A", rollout.MsgTask, "").send("tB", "kB", "B", rollout.MsgTask, "").send("tC", "kC", "C", rollout.MsgTask, "").
		done("p1").turn("p2").recv("rC", "krC", "C", rollout.MsgResult, "tC").done("p2").write()
	s.thread("A", "rA", rollout.SessionMeta{ParentThreadID: "P"}).turn("a1").recv("tA", "kA", "P", rollout.MsgTask, "").done("a1").write()
	s.thread("B", "rB", rollout.SessionMeta{ParentThreadID: "P"}).turn("b1").recv("tB", "kB", "P", rollout.MsgTask, "").
		send("rB", "krB", "P", rollout.MsgResult, "tB").done("b1").write()
	s.thread("C", "rC", rollout.SessionMeta{ParentThreadID: "P"}).turn("c1").recv("tC", "kC", "P", rollout.MsgTask, "").
		send("rC", "krC", "P", rollout.MsgResult, "tC").done("c1").write()
	tr := s.build()
	got := map[string]string{}
	for _, cr := range tr.ChildResults {
		got[cr.TaskMsgID] = cr.State
	}
	want := map[string]string{"tA": dedupe.NoResult, "tB": dedupe.Unconfirmed}
	if len(got) != len(want) || got["tA"] != want["tA"] || got["tB"] != want["tB"] {
		t.Errorf("child results %v, want %v", got, want)
	}
	if n := tr.Node("P"); n == nil || n.Unconfirmed != 2 || n.Status != NeedsAttention {
		t.Errorf("parent node: %+v", n)
	}
}

// TestInvalidIDsFlagged: an event whose IDs could never be subject tokens
// (to_thread "*", a msg_id with a dot, a child "a b") is not listed as a
// delivery or an edge; it is an invalid_id problem naming file, line and
// ordinal.
func TestInvalidIDsFlagged(t *testing.T) {
	s := newScene(t)
	s.thread("P", "rP", rollout.SessionMeta{}).turn("p1").
		send("m1", "k1", "*", rollout.MsgTask, "").
		send("a.b", "k2", "C", rollout.MsgTask, "").
		spawn("a b").
		send("m3", "k3", "C", rollout.MsgTask, "").done("p1").write()
	tr := s.build()
	if len(tr.Deliveries) != 1 || tr.Deliveries[0].MsgID != "m3" {
		t.Fatalf("deliveries %+v, want only m3", tr.Deliveries)
	}
	var bad []Problem
	for _, p := range tr.Problems {
		if p.Kind == "invalid_id" {
			bad = append(bad, p)
		}
	}
	if len(bad) != 3 {
		t.Fatalf("invalid_id problems %+v, want 3", bad)
	}
	for _, want := range []string{`"*"`, `"a.b"`, `"a b"`} {
		found := false
		for _, p := range bad {
			if strings.Contains(p.Detail, want) && strings.Contains(p.Detail, "ordinal ") && strings.Contains(p.Detail, "line ") {
				found = true
			}
		}
		if !found {
			t.Errorf("no invalid_id problem names %s with line and ordinal: %+v", want, bad)
		}
	}
	for _, th := range tr.Roots {
		for _, c := range th.Children {
			if c.ThreadID == "a b" {
				t.Errorf("an edge to the invalid child %q is in the tree", c.ThreadID)
			}
		}
	}
}
