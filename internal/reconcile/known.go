package reconcile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Fresh returns the findings the log does not already say: a finding whose
// call or message's latest reconciled record in view has the same outcome,
// evidence and by is old news, and appending it again would only repeat it.
func Fresh(view rollout.Log, findings []Finding) ([]Finding, error) {
	if len(findings) == 0 {
		return nil, nil
	}
	latest := map[string]rollout.Reconciled{} // "call:ID" or "msg:ID" -> the last record
	err := eachEvent(view, rollout.EventReconciled, func(r *rollout.Record) bool {
		if rec, err := rollout.Decode[rollout.Reconciled](r); err == nil {
			latest[subjectKey(rec)] = rec
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, f := range findings {
		rec := f.Record()
		if old, ok := latest[subjectKey(rec)]; ok && old.Outcome == rec.Outcome && old.Evidence == rec.Evidence && old.By == rec.By {
			continue
		}
		latest[subjectKey(rec)] = rec
		out = append(out, f)
	}
	return out, nil
}

func subjectKey(r rollout.Reconciled) string {
	if r.CallID != "" {
		return "call:" + r.CallID
	}
	return "msg:" + r.MsgID
}

// checkOpen refuses a reconciled record about a call or message that is not
// open in the thread: a call must be dangling in st (no output, no resolving
// reconciled record), a message must be a delivery from or to the thread
// that is not confirmed. The error lists the open ones.
func checkOpen(thread string, st *replay.State, deliveries []dedupe.Delivery, rec rollout.Reconciled) error {
	var open []string
	if rec.CallID != "" {
		for _, c := range st.DanglingCalls {
			if c.CallID == rec.CallID {
				return nil
			}
			open = append(open, c.CallID)
		}
		return fmt.Errorf("reconcile: call %s is not open in thread %s (%s)", rec.CallID, thread, openList(open, "call"))
	}
	seen := map[string]bool{}
	for _, d := range deliveries {
		if d.State == dedupe.Confirmed || (d.FromThread != thread && d.ToThread != thread) {
			continue
		}
		if d.MsgID == rec.MsgID {
			return nil
		}
		if !seen[d.MsgID] {
			seen[d.MsgID] = true
			open = append(open, d.MsgID)
		}
	}
	return fmt.Errorf("reconcile: message %s is not open in thread %s (%s)", rec.MsgID, thread, openList(open, "message"))
}

func openList(ids []string, what string) string {
	if len(ids) == 0 {
		return "no " + what + " is open there"
	}
	sort.Strings(ids)
	return "open: " + strings.Join(ids, ", ")
}
