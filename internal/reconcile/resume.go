package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/tree/ops"
)

// ErrActive is returned when the thread's lease is still held: a resume
// waits for the old writer's lease to expire, so it never races a live one.
var ErrActive = errors.New("reconcile: the thread's lease is held: resume only after it expires (the old writer may still be running)")

// ResumeOptions tune Resume.
type ResumeOptions struct {
	Holder string // lease holder name
	Prober Prober // asked about keyed calls; nil: nobody is asked (all stay unknown)
	// RetryProvenNotExecuted re-sends the messages the MAIL search proved
	// were never published, under their original msg_id. Nothing else is
	// ever re-sent or re-executed.
	RetryProvenNotExecuted bool
	Model                  string // the model the resumed session will use (warns on a change)
	// Deliveries returns the ledger's deliveries (nil: sends are not looked at).
	Deliveries func(ctx context.Context) ([]dedupe.Delivery, error)
	// Lease, when set, is the thread's lease, already taken by the caller
	// (an agent that goes on writing after its resume): Resume uses it and
	// leaves it held. Nil: Resume takes the lease and releases it.
	Lease *stream.Lease
	// DataDir is a data dir whose mirror was written from this bus: the
	// thread's rollouts are replayed from their mirror files and only what
	// the bus holds past them is read (ops.LoadView). "" reads every
	// rollout from the bus from its start.
	DataDir string
}

// ResumeReport is what a resume found and wrote.
type ResumeReport struct {
	Thread, Rollout string
	Plan            *Plan
	Aborted         string    // the stale turn aborted, if any
	Findings        []Finding // every answer this resume got
	// Recorded are the findings appended as reconciled: those the rollout
	// did not already say (see Fresh).
	Recorded []Finding
	Appended int      // records appended: the abort and Recorded
	Resent   []string // msg_ids re-sent
	State    *replay.State
	// Read says what the resume read of the thread and from where: the
	// mirror's share, and the records and messages read from the bus
	// (those it appended and read back included).
	Read ops.ReadStats
	// Tail is the current rollout's valid tail after the resume: a caller
	// that goes on writing under its own lease (ResumeOptions.Lease) opens
	// its writer there (stream.Bus.OpenWriterAt) without reading it again.
	Tail stream.KnownTail
}

// Resume prepares a crashed thread to continue: it takes the thread's lease
// (refused while the old one lives), replays, appends
// turn_aborted{stale_after_crash} for a stale turn, asks about keyed calls and
// unreceived sends and records the answers as reconciled, and re-sends only
// what was proven never published, when asked to.
func Resume(ctx context.Context, bus *stream.Bus, thread string, opt ResumeOptions) (*ResumeReport, error) {
	lease := opt.Lease
	switch {
	case lease != nil && lease.Thread() != thread:
		return nil, fmt.Errorf("reconcile: resume %s with the lease of %s", thread, lease.Thread())
	case lease == nil:
		var err error
		lease, err = bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: opt.Holder})
		var held *stream.LeaseHeldError
		if errors.As(err, &held) {
			return nil, fmt.Errorf("%w: %w", ErrActive, err)
		}
		if err != nil {
			return nil, err
		}
		defer lease.Release(context.WithoutCancel(ctx))
	}
	src, st, err := load(ctx, bus, thread, opt)
	if err != nil {
		return nil, err
	}
	var deliveries []dedupe.Delivery
	if opt.Deliveries != nil {
		if deliveries, err = opt.Deliveries(ctx); err != nil {
			return nil, err
		}
	}
	plan, err := Decide(thread, st, deliveries)
	if err != nil {
		return nil, err
	}
	rep := &ResumeReport{Thread: thread, Rollout: src.Current, Plan: plan}
	defer func() { rep.Read, rep.Tail = src.Read, src.Known }()
	pr := opt.Prober
	if pr == nil {
		pr = noProber{}
	}
	if rep.Findings, err = plan.Probe(ctx, pr, &busMail{bus: bus, dir: opt.DataDir, views: map[string]rollout.Log{}}); err != nil {
		return nil, err
	}

	if rep.Recorded, err = Fresh(src.Log, rep.Findings); err != nil {
		return nil, err
	}
	if plan.StaleTurn != nil || len(rep.Recorded) > 0 { // a resume that learned nothing writes nothing
		// The writer continues at the tail this resume read: the rollout
		// is not read again (OpenWriterAt still checks that nothing was
		// accepted past it, or the plan was made on a stale log).
		w, err := bus.OpenWriterAt(ctx, lease, src.Current, src.Known, stream.WriterOptions{})
		if errors.Is(err, stream.ErrTailMoved) {
			return nil, fmt.Errorf("reconcile: thread %s changed while it was resumed (an old writer's last publish landed?); resume again: %w", thread, err)
		}
		if err != nil {
			return nil, err
		}
		b := rollout.Builder{Next: w.Next()}
		var recs []rollout.Record
		if plan.StaleTurn != nil {
			recs = append(recs, b.TurnAborted(plan.StaleTurn.TurnID, rollout.AbortStaleAfterCrash))
			rep.Aborted = plan.StaleTurn.TurnID
		}
		for _, f := range rep.Recorded {
			recs = append(recs, b.Event(f.Record()))
		}
		for _, r := range recs {
			if _, err := w.Append(ctx, r); err != nil {
				w.Close(context.WithoutCancel(ctx))
				return nil, err
			}
		}
		if err := w.Close(ctx); err != nil {
			return nil, err
		}
		rep.Appended = len(recs)
	}
	if opt.RetryProvenNotExecuted {
		for _, f := range rep.Findings {
			if f.Question.MsgID == "" || f.Answer.Outcome != rollout.OutcomeNotExecuted || f.Answer.By != "probe:mail" {
				continue
			}
			payload, err := sentPayload(src.Log, f.Question.MsgID)
			if err != nil {
				return rep, err
			}
			if err := dedupe.ResendMail(ctx, bus, thread, payload); err != nil {
				return rep, fmt.Errorf("reconcile: re-send %s: %w", f.Question.MsgID, err)
			}
			rep.Resent = append(rep.Resent, f.Question.MsgID)
		}
	}
	// The state after: the view read once, with what the bus accepted
	// since (the records just appended) read back and folded in.
	n, err := src.Extend(ctx, bus)
	if err != nil {
		return rep, err
	}
	rep.State = st
	if n > 0 {
		rep.State, err = replay.Fast(src.Log, replay.Options{Model: opt.Model})
		if err != nil && ctx.Err() == nil && src.Read.MirrorOrdinal > 0 {
			// The mirror file went away under the view (compressed or
			// re-materialized meanwhile): read the thread again.
			var again *ops.View
			if again, rep.State, err = load(ctx, bus, thread, opt); err == nil {
				again.Read.BusRecords += src.Read.BusRecords
				again.Read.BusGets += src.Read.BusGets
				src = again
			}
		}
	}
	return rep, err
}

// load reads the thread once (ops.LoadView: from the mirror where it holds
// it, the bus past that) and replays it by the fast path. A mirror file that
// turns out damaged inside what the replay reads (a corrupt line, a crc
// mismatch) is not trusted: the thread is read again from the bus alone.
func load(ctx context.Context, bus *stream.Bus, thread string, opt ResumeOptions) (*ops.View, *replay.State, error) {
	src, err := ops.LoadView(ctx, bus, thread, ops.ViewOptions{DataDir: opt.DataDir})
	if err != nil {
		return nil, nil, err
	}
	st, err := replay.Fast(src.Log, replay.Options{Model: opt.Model})
	mirrored := src.Read.MirrorOrdinal > 0 || src.Read.MirrorBases > 0
	if !mirrored || ctx.Err() != nil || (err == nil && st.Replay.CorruptLines == 0) {
		return src, st, err
	}
	why := "the mirror's copy is damaged"
	if err != nil {
		why += ": " + err.Error()
	} else {
		why += fmt.Sprintf(": %d corrupt lines", st.Replay.CorruptLines)
	}
	first := src.Read
	if src, err = ops.LoadView(ctx, bus, thread, ops.ViewOptions{}); err != nil {
		return nil, nil, err
	}
	src.Read.BusRecords += first.BusRecords
	src.Read.BusGets += first.BusGets
	src.Read.Fallback = why
	st, err = replay.Fast(src.Log, replay.Options{Model: opt.Model})
	return src, st, err
}

// noProber asks nobody: no answer, nothing recorded.
type noProber struct{}

func (noProber) Probe(context.Context, Question) (Answer, error) {
	return Answer{}, fmt.Errorf("%w: no prober was configured", ErrNotAsked)
}

// busMail looks sends up on the bus; it reads each receiver once per resume.
type busMail struct {
	bus   *stream.Bus
	dir   string                 // the data dir whose mirror the receivers are read from ("" : the bus)
	views map[string]rollout.Log // receiver thread -> its current view; nil: never wrote a line
}

func (m *busMail) Pending(ctx context.Context, to, msgID string) (bool, error) {
	return m.bus.MailPending(ctx, to, msgID)
}

// Received reads the receiver's current view for a receipt: from its mirror
// files and the bus past them (ops.LoadView).
func (m *busMail) Received(ctx context.Context, to, msgID string) (bool, error) {
	view, ok := m.views[to]
	if !ok {
		src, err := ops.LoadView(ctx, m.bus, to, ops.ViewOptions{DataDir: m.dir})
		switch {
		case errors.Is(err, ops.ErrNoThread): // the receiver never wrote a line
		case err != nil:
			return false, err
		default:
			view = src.Log
		}
		m.views[to] = view
	}
	if view == nil {
		return false, nil
	}
	found := false
	err := eachEvent(view, rollout.EventInterAgentReceived, func(r *rollout.Record) bool {
		id, _ := rollout.LookupString(r.Payload, "msg_id")
		found = id == msgID
		return !found
	})
	return found, err
}

// sentPayload finds the logged payload of a send.
func sentPayload(view rollout.Log, msgID string) ([]byte, error) {
	var payload []byte
	err := eachEvent(view, rollout.EventInterAgentSent, func(r *rollout.Record) bool {
		if id, _ := rollout.LookupString(r.Payload, "msg_id"); id == msgID {
			payload = r.Payload
		}
		return true
	})
	if err == nil && payload == nil {
		err = fmt.Errorf("reconcile: no inter_agent_sent %s in the thread's log", msgID)
	}
	return payload, err
}

func eachEvent(view rollout.Log, kind string, fn func(*rollout.Record) bool) error {
	cur, err := view.Forward(0)
	if err != nil {
		return err
	}
	return rollout.Scan(cur, nil, func(e rollout.Entry) (bool, error) {
		if e.Type == rollout.TypeEventMsg && e.EventKind() == kind {
			return fn(&e.Record), nil
		}
		return true, nil
	})
}

// Note records what a person found out about a call or a message of an idle
// thread: a reconciled event, under the thread's lease. The call must be
// dangling in the thread, the message a delivery from or to it that is not
// confirmed (deliveries returns the ledger's; nil: no message is open);
// anything else is refused with the open ones listed, and nothing appended.
func Note(ctx context.Context, bus *stream.Bus, thread, holder string, rec rollout.Reconciled, deliveries func(context.Context) ([]dedupe.Delivery, error)) (int64, error) {
	if (rec.CallID == "") == (rec.MsgID == "") {
		return 0, errors.New("reconcile: name exactly one call or message")
	}
	if !ValidOutcome(rec.Outcome) {
		return 0, fmt.Errorf("reconcile: outcome %q: want executed, not_executed, duplicate or unknown", rec.Outcome)
	}
	if rec.Evidence == "" {
		return 0, errors.New("reconcile: say what you checked (evidence)")
	}
	rec.Type = rollout.EventReconciled
	lease, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: holder})
	var held *stream.LeaseHeldError
	if errors.As(err, &held) {
		return 0, fmt.Errorf("%w: %w", ErrActive, err)
	}
	if err != nil {
		return 0, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	src, err := ops.LoadView(ctx, bus, thread, ops.ViewOptions{}) // read once: the writer opens at its tail
	if err != nil {
		return 0, err
	}
	st, err := replay.Fast(src.Log, replay.Options{})
	if err != nil {
		return 0, err
	}
	var ds []dedupe.Delivery
	if rec.MsgID != "" && deliveries != nil {
		if ds, err = deliveries(ctx); err != nil {
			return 0, err
		}
	}
	if err := checkOpen(thread, st, ds, rec); err != nil {
		return 0, err
	}
	w, err := bus.OpenWriterAt(ctx, lease, src.Current, src.Known, stream.WriterOptions{})
	if err != nil {
		return 0, err
	}
	b := rollout.Builder{Next: w.Next()}
	ord, err := w.Append(ctx, b.Event(rec))
	if err != nil {
		w.Close(context.WithoutCancel(ctx))
		return 0, err
	}
	return ord, w.Close(ctx)
}
