package dedupe

import (
	"fmt"
	"sort"
	"strings"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Delivery states. Part of the CLI's JSON output: do not rename.
const (
	Confirmed          = "confirmed"
	Unconfirmed        = "unconfirmed"
	PossiblyDuplicated = "possibly_duplicated"
	OrphanReceipt      = "orphan_receipt"
	RolledBackReceipt  = "rolled_back_receipt"
)

// Origin names a record where it was first written: a copied record keeps
// its origin, so it is counted once.
type Origin struct {
	Rollout string
	Ordinal int64
}

// Send is one inter_agent_sent record.
type Send struct {
	MsgID, IdempotencyKey string
	From, To, Kind        string
	InReplyTo             string
	Origin                Origin
	InEffect              bool
}

// Receipt is one inter_agent_received record, in the receiving thread.
type Receipt struct {
	MsgID, IdempotencyKey string
	From, To, Kind        string // To: the receiving thread
	InReplyTo             string
	Origin                Origin
	// InEffect: the receipt is in effect in the receiving thread's current
	// view (not rolled back, not reverted away).
	InEffect bool
}

// Note is a reconciled{msg_id} record: what a probe or a person found out
// about a send.
type Note struct {
	MsgID, Outcome, Evidence, By string
	Origin                       Origin
}

// Ledger collects sends and receipts; Classify judges them.
type Ledger struct {
	sends    map[Origin]Send
	receipts map[Origin]Receipt
	notes    map[Origin]Note
}

// New returns an empty ledger.
func New() *Ledger {
	return &Ledger{sends: map[Origin]Send{}, receipts: map[Origin]Receipt{}, notes: map[Origin]Note{}}
}

// AddSend records a send; the same origin seen again (a copy) counts once.
func (l *Ledger) AddSend(s Send) { l.sends[s.Origin] = merge(l.sends[s.Origin], s) }

// AddReceipt records a receipt; a copy counts once. A receipt is in effect if
// any view of it is (the origin's own thread decides; copies never are).
func (l *Ledger) AddReceipt(r Receipt) {
	if old, ok := l.receipts[r.Origin]; ok {
		r.InEffect = r.InEffect || old.InEffect
	}
	l.receipts[r.Origin] = r
}

// AddNote records a reconciliation of a send.
func (l *Ledger) AddNote(n Note) { l.notes[n.Origin] = n }

func merge(old, s Send) Send {
	s.InEffect = s.InEffect || old.InEffect
	return s
}

// Delivery is one message as seen by one receiving thread.
type Delivery struct {
	MsgID          string `json:"msg_id"`
	IdempotencyKey string `json:"idempotency_key"`
	FromThread     string `json:"from_thread"`
	ToThread       string `json:"to_thread"`
	Kind           string `json:"kind"`
	InReplyTo      string `json:"in_reply_to,omitempty"`
	State          string `json:"state"`
	Reason         string `json:"reason"`
	Sends          int    `json:"sends"`
	Receipts       int    `json:"receipts"`
	InEffect       int    `json:"receipts_in_effect"`
}

type key struct{ msg, to string }

// Classify returns every delivery, ordered by msg_id then receiver.
func (l *Ledger) Classify() []Delivery {
	sendsBy := map[string][]Send{}
	for _, s := range l.sends {
		sendsBy[s.MsgID] = append(sendsBy[s.MsgID], s)
	}
	recvBy := map[key][]Receipt{}
	keyMsgs := map[[2]string]map[string]bool{} // (receiver, idempotency key) -> msg ids received
	for _, r := range l.receipts {
		k := key{r.MsgID, r.To}
		recvBy[k] = append(recvBy[k], r)
		if r.IdempotencyKey != "" {
			ik := [2]string{r.To, r.IdempotencyKey}
			if keyMsgs[ik] == nil {
				keyMsgs[ik] = map[string]bool{}
			}
			keyMsgs[ik][r.MsgID] = true
		}
	}
	notesBy := map[string][]Note{}
	for _, n := range l.notes {
		notesBy[n.MsgID] = append(notesBy[n.MsgID], n)
	}

	var out []Delivery
	seen := map[key]bool{}
	for k, rs := range recvBy {
		seen[k] = true
		out = append(out, l.judge(k, sendsBy[k.msg], rs, keyMsgs, notesBy[k.msg]))
	}
	for msg, ss := range sendsBy {
		for _, to := range receivers(ss) {
			k := key{msg, to}
			if !seen[k] {
				seen[k] = true
				out = append(out, l.judge(k, ss, nil, keyMsgs, notesBy[msg]))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].MsgID != out[j].MsgID {
			return out[i].MsgID < out[j].MsgID
		}
		return out[i].ToThread < out[j].ToThread
	})
	return out
}

func receivers(ss []Send) []string {
	var to []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s.To] {
			seen[s.To] = true
			to = append(to, s.To)
		}
	}
	sort.Strings(to)
	return to
}

func (l *Ledger) judge(k key, ss []Send, rs []Receipt, keyMsgs map[[2]string]map[string]bool, notes []Note) Delivery {
	d := Delivery{MsgID: k.msg, ToThread: k.to, Sends: len(ss), Receipts: len(rs)}
	var sentHere []Send
	for _, s := range ss {
		if s.To == k.to {
			sentHere = append(sentHere, s)
		}
	}
	// The first send written names the delivery (a re-send repeats it).
	sort.Slice(sentHere, func(i, j int) bool { return lessOrigin(sentHere[i].Origin, sentHere[j].Origin) })
	switch {
	case len(sentHere) > 0:
		s := sentHere[0]
		d.IdempotencyKey, d.FromThread, d.Kind, d.InReplyTo = s.IdempotencyKey, s.From, s.Kind, s.InReplyTo
	case len(rs) > 0:
		r := rs[0]
		d.IdempotencyKey, d.FromThread, d.Kind, d.InReplyTo = r.IdempotencyKey, r.From, r.Kind, r.InReplyTo
	}
	d.Sends = len(sentHere)
	sort.Slice(rs, func(i, j int) bool { return lessOrigin(rs[i].Origin, rs[j].Origin) })
	for _, r := range rs {
		if r.InEffect {
			d.InEffect++
		}
	}
	var others []string
	if d.IdempotencyKey != "" {
		for m := range keyMsgs[[2]string{k.to, d.IdempotencyKey}] {
			if m != k.msg {
				others = append(others, m)
			}
		}
		sort.Strings(others)
	}
	switch {
	case len(rs) > 0 && len(sentHere) == 0:
		d.State = OrphanReceipt
		if len(ss) > 0 {
			d.Reason = fmt.Sprintf("received by %s at %s, but it was sent to %s", k.to, where(rs[0].Origin), receivers(ss)[0])
		} else {
			d.Reason = fmt.Sprintf("received by %s at %s; no sender's log has msg_id %s", k.to, where(rs[0].Origin), k.msg)
		}
	case len(rs) == 0:
		d.State = Unconfirmed
		d.Reason = fmt.Sprintf("sent by %s at %s; no receipt at %s", d.FromThread, where(sentHere[0].Origin), k.to)
		if len(sentHere) > 1 {
			d.Reason += fmt.Sprintf(" (sent %d times under this msg_id)", len(sentHere))
		}
		if n := noteText(notes); n != "" {
			d.Reason += "; " + n
		}
	case len(rs) > 1:
		d.State = PossiblyDuplicated
		at := make([]string, len(rs))
		for i, r := range rs {
			at[i] = where(r.Origin)
		}
		d.Reason = fmt.Sprintf("received %d times by %s (%s)", len(rs), k.to, strings.Join(at, ", "))
	case len(others) > 0:
		d.State = PossiblyDuplicated
		d.Reason = fmt.Sprintf("idempotency key %s also received by %s as msg_id %s", d.IdempotencyKey, k.to, strings.Join(others, ", "))
	case d.InEffect == 0:
		d.State = RolledBackReceipt
		d.Reason = fmt.Sprintf("received by %s at %s, but that receipt is no longer in effect (rolled back or reverted)", k.to, where(rs[0].Origin))
	default:
		d.State = Confirmed
		d.Reason = fmt.Sprintf("received once by %s at %s", k.to, where(rs[0].Origin))
	}
	return d
}

func noteText(notes []Note) string {
	if len(notes) == 0 {
		return ""
	}
	sort.Slice(notes, func(i, j int) bool { return lessOrigin(notes[i].Origin, notes[j].Origin) })
	n := notes[len(notes)-1]
	return fmt.Sprintf("reconciled %s by %s: %s", n.Outcome, n.By, n.Evidence)
}

func where(o Origin) string { return fmt.Sprintf("%s#%d", o.Rollout, o.Ordinal) }

func lessOrigin(a, b Origin) bool {
	if a.Rollout != b.Rollout {
		return a.Rollout < b.Rollout
	}
	return a.Ordinal < b.Ordinal
}

// ChildResult is a task or a result whose outcome the parent cannot count on.
type ChildResult struct {
	TaskMsgID   string `json:"task_msg_id"`
	ResultMsgID string `json:"result_msg_id,omitempty"`
	Parent      string `json:"parent_thread"`
	Child       string `json:"child_thread"`
	State       string `json:"state"` // no_result, or the result delivery's state
	Reason      string `json:"reason"`
}

// NoResult is the ChildResult state of a task whose child never sent a result.
const NoResult = "no_result"

// ChildResults lists tasks whose child never sent a result, and results that
// are not confirmed at the parent.
func (l *Ledger) ChildResults(deliveries []Delivery) []ChildResult {
	results := map[string][]Send{} // task msg_id -> result sends replying to it
	for _, s := range l.sends {
		if s.Kind == rollout.MsgResult && s.InReplyTo != "" {
			results[s.InReplyTo] = append(results[s.InReplyTo], s)
		}
	}
	var out []ChildResult
	for _, d := range deliveries {
		switch d.Kind {
		case rollout.MsgTask:
			if d.State == OrphanReceipt {
				continue
			}
			if len(results[d.MsgID]) == 0 {
				out = append(out, ChildResult{TaskMsgID: d.MsgID, Parent: d.FromThread, Child: d.ToThread, State: NoResult,
					Reason: fmt.Sprintf("task %s to %s has no result (task delivery: %s)", d.MsgID, d.ToThread, d.State)})
			}
		case rollout.MsgResult:
			if d.State == Confirmed {
				continue
			}
			out = append(out, ChildResult{TaskMsgID: d.InReplyTo, ResultMsgID: d.MsgID, Parent: d.ToThread, Child: d.FromThread,
				State: d.State, Reason: d.Reason})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.TaskMsgID != b.TaskMsgID:
			return a.TaskMsgID < b.TaskMsgID
		case a.ResultMsgID != b.ResultMsgID:
			return a.ResultMsgID < b.ResultMsgID
		case a.Parent != b.Parent:
			return a.Parent < b.Parent
		}
		return a.Child < b.Child
	})
	return out
}
