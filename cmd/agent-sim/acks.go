package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/logbook-agents/logbook/agent"
)

// A worker's own record of what it was told (agent-sim worker --acks FILE):
// the ground truth `agent-sim crash` checks the system against, kept
// outside it. One JSON object a line, written (not fsynced: the faults are
// process deaths, and the page cache outlives them) right after the bus
// acknowledged what it records:
//
//	{"t":"ack","thread":T,"rollout":R,"ordinal":N,"epoch":E}
//	    a barrier returned: every record of R up to N is acknowledged,
//	    written under lease epoch E
//	{"t":"resume","thread":T,"in_flight":[keys],"reconciled":{key:outcome}}
//	    Open found these keyed calls without an output; the probe's answers
//	{"t":"retry","thread":T,"key":K}
//	    a call a probe proved not executed is run again under its key
//	{"t":"received","thread":T,"msgs":[msg ids]}
//	    Receive returned these messages: each receipt logged, flushed and
//	    the message acknowledged
type ackEntry struct {
	T          string            `json:"t"`
	Thread     string            `json:"thread"`
	Rollout    string            `json:"rollout,omitempty"`
	Ordinal    int64             `json:"ordinal,omitempty"`
	Epoch      uint64            `json:"epoch,omitempty"`
	InFlight   []string          `json:"in_flight,omitempty"`
	Reconciled map[string]string `json:"reconciled,omitempty"`
	Key        string            `json:"key,omitempty"`
	Msgs       []string          `json:"msgs,omitempty"`
}

// ackLog appends entries to a worker's --acks file; a nil ackLog records
// nothing.
type ackLog struct {
	mu sync.Mutex
	f  *os.File
}

func openAckLog(path string) (*ackLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--acks: %w", err)
	}
	return &ackLog{f: f}, nil
}

func (l *ackLog) write(e ackEntry) {
	if l == nil {
		return
	}
	b, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Write(append(b, '\n')) // one write(2) per line, O_APPEND
}

// acked records that th's rollout is acknowledged up to its last ordinal.
func (l *ackLog) acked(th *agent.Thread) {
	l.write(ackEntry{T: "ack", Thread: th.ID(), Rollout: th.Rollout(), Ordinal: th.LastOrdinal(), Epoch: th.Epoch()})
}

// resumed records the keyed calls an Open found in flight and the probe's answers.
func (l *ackLog) resumed(th *agent.Thread, res *agent.Resumed) {
	e := ackEntry{T: "resume", Thread: th.ID(), Reconciled: map[string]string{}}
	seen := map[string]bool{}
	for _, f := range res.Findings {
		if f.Question.CallID == "" || f.Question.IdempotencyKey == "" {
			continue
		}
		seen[f.Question.IdempotencyKey] = true
		e.InFlight = append(e.InFlight, f.Question.IdempotencyKey)
		e.Reconciled[f.Question.IdempotencyKey] = f.Answer.Outcome
	}
	for _, c := range res.Unknown {
		if c.IdempotencyKey != "" && !seen[c.IdempotencyKey] {
			seen[c.IdempotencyKey] = true
			e.InFlight = append(e.InFlight, c.IdempotencyKey)
		}
	}
	if len(e.InFlight) > 0 {
		l.write(e)
	}
}

// received records the messages a Receive returned.
func (l *ackLog) received(thread string, mail []agent.Mail) {
	if len(mail) == 0 {
		return
	}
	e := ackEntry{T: "received", Thread: thread}
	for _, m := range mail {
		e.Msgs = append(e.Msgs, m.MsgID)
	}
	l.write(e)
}

func (l *ackLog) retried(thread, key string) {
	l.write(ackEntry{T: "retry", Thread: thread, Key: key})
}

// readAckLogs reads every worker's acks file in dir (*.jsonl); a torn last
// line (a writer killed mid-write) is skipped.
func readAckLogs(dir string) ([]ackEntry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []ackEntry
	for _, de := range ents {
		f, err := os.Open(dir + "/" + de.Name())
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<16), 4<<20)
		for sc.Scan() {
			var e ackEntry
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				out = append(out, e)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", de.Name(), err)
		}
	}
	return out, nil
}
