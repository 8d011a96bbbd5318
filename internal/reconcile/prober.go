package reconcile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Question is what a Prober is asked about: a dangling call, or a send with no
// receipt.
type Question struct {
	Thread         string
	CallID         string // a call; or
	MsgID          string // a send
	Name           string // the call's tool, or the message kind
	IdempotencyKey string
	TurnID         string
	To             string // a send's receiving thread
	// Mail says what the MAIL stream showed for a send: "pending" (still
	// there), "absent", or "" (not searched).
	Mail string
}

func (q Question) String() string {
	if q.CallID != "" {
		return fmt.Sprintf("call %s %s (idempotency key %s, turn %s)", q.CallID, q.Name, orNone(q.IdempotencyKey), orNone(q.TurnID))
	}
	return fmt.Sprintf("%s message %s to %s (idempotency key %s)", q.Name, q.MsgID, q.To, orNone(q.IdempotencyKey))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Answer is what a prober found.
type Answer struct {
	Outcome  string // rollout.OutcomeExecuted, OutcomeNotExecuted, OutcomeUnknown, OutcomeDuplicate
	Evidence string
	By       string // who answered: "probe:<name>", "person:<name>"
}

// Prober finds out whether something happened in the outside world. A
// prober that could ask nobody returns ErrNotAsked: that is no answer, and
// nothing is recorded (an "unknown" record would credit someone with an
// answer nobody gave).
type Prober interface {
	Probe(ctx context.Context, q Question) (Answer, error)
}

// ErrNotAsked is a Prober's "nobody was asked": no terminal to ask a person,
// no prober configured, or the person's input ended before an answer.
var ErrNotAsked = errors.New("reconcile: nobody was asked")

var (
	_ Prober = (*Scripted)(nil)
	_ Prober = (*Terminal)(nil)
)

// Scripted answers from a table keyed by call id, msg id or idempotency key;
// anything else is unknown. It records what it was asked.
type Scripted struct {
	Answers map[string]Answer
	Asked   []Question
}

// Probe implements Prober.
func (s *Scripted) Probe(_ context.Context, q Question) (Answer, error) {
	s.Asked = append(s.Asked, q)
	for _, k := range []string{q.CallID, q.MsgID, q.IdempotencyKey} {
		if a, ok := s.Answers[k]; ok && k != "" {
			if a.By == "" {
				a.By = "probe:scripted"
			}
			return a, nil
		}
	}
	return Answer{Outcome: rollout.OutcomeUnknown, Evidence: "no scripted answer", By: "probe:scripted"}, nil
}

// Terminal asks a person. When In is not a terminal it returns ErrNotAsked
// at once, so a resume under a scheduler never hangs and records nothing.
type Terminal struct {
	In          io.Reader
	Out         io.Writer
	Interactive bool   // In is a terminal
	Who         string // the person's name, for the record
	lines       *bufio.Scanner
}

// Probe implements Prober.
func (t *Terminal) Probe(ctx context.Context, q Question) (Answer, error) {
	by := "person:" + orNone(t.Who)
	if !t.Interactive {
		return Answer{}, fmt.Errorf("%w: no terminal to ask a person", ErrNotAsked)
	}
	if t.lines == nil {
		t.lines = bufio.NewScanner(t.In)
	}
	fmt.Fprintf(t.Out, "\n%s: %s\n", q.Thread, q)
	if q.Mail != "" {
		fmt.Fprintf(t.Out, "  the MAIL stream shows it %s\n", q.Mail)
	}
	for {
		if err := ctx.Err(); err != nil {
			return Answer{}, err
		}
		fmt.Fprint(t.Out, "  did it happen? [e]xecuted / [n]ot executed / [d]uplicate / [u]nknown: ")
		if !t.lines.Scan() {
			return Answer{}, fmt.Errorf("%w: the input ended before an answer", ErrNotAsked)
		}
		outcome := map[string]string{"e": rollout.OutcomeExecuted, "n": rollout.OutcomeNotExecuted,
			"d": rollout.OutcomeDuplicate, "u": rollout.OutcomeUnknown}[strings.ToLower(strings.TrimSpace(t.lines.Text()))]
		if outcome == "" {
			continue
		}
		fmt.Fprint(t.Out, "  evidence (what you checked): ")
		evidence := "none given"
		if t.lines.Scan() && strings.TrimSpace(t.lines.Text()) != "" {
			evidence = strings.TrimSpace(t.lines.Text())
		}
		return Answer{Outcome: outcome, Evidence: evidence, By: by}, nil
	}
}

// ValidOutcome reports whether s is an outcome a reconciled record may carry.
func ValidOutcome(s string) bool {
	switch s {
	case rollout.OutcomeExecuted, rollout.OutcomeNotExecuted, rollout.OutcomeUnknown, rollout.OutcomeDuplicate:
		return true
	}
	return false
}
