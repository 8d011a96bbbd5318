package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/logbook-agents/logbook/internal/replay"
)

// The --json shapes as docs/CLI.md documents them. Tests decode each
// command's output strictly into these: a key the docs do not name fails, a
// key in another case fails (encoding/json alone would match "Thread" to
// "thread"), and a list printed as null fails. Pointers are the only values
// that may be null; json.RawMessage is opaque (log payloads as written).

type stateDoc = replay.State // the state, exactly as replay --json prints it

type positionDoc struct {
	RolloutID           string `json:"rollout_id"`
	EndOrdinalExclusive int64  `json:"end_ordinal_exclusive"`
	EndByteOffset       int64  `json:"end_byte_offset"`
}

type forkDoc struct {
	ThreadID      string      `json:"thread_id"`
	RolloutID     string      `json:"rollout_id"`
	FromThreadID  string      `json:"from_thread_id"`
	FromRolloutID string      `json:"from_rollout_id"`
	Mode          string      `json:"mode"`
	Position      positionDoc `json:"position"`
	Copied        int         `json:"copied"`
	AbortedTurn   string      `json:"aborted_turn"`
	State         *stateDoc   `json:"state"`
	NotUndone     string      `json:"not_undone"`
}

type historyDoc struct {
	ThreadID        string       `json:"thread_id"`
	RolloutID       string       `json:"rollout_id"`
	SealedRolloutID string       `json:"sealed_rollout_id"`
	HistoryBase     *positionDoc `json:"history_base"`
	UndoneTurns     []string     `json:"undone_turns"`
	State           *stateDoc    `json:"state"`
	NotUndone       string       `json:"not_undone"`
}

type callDoc struct {
	CallID         string `json:"call_id"`
	Name           string `json:"name"`
	IdempotencyKey string `json:"idempotency_key"`
	TurnID         string `json:"turn_id"`
}

type findingDoc struct {
	CallID   string `json:"call_id"`
	MsgID    string `json:"msg_id"`
	ToThread string `json:"to_thread"`
	Mail     string `json:"mail"`
	Outcome  string `json:"outcome"`
	Evidence string `json:"evidence"`
	By       string `json:"by"`
	Recorded bool   `json:"recorded"`
}

type unresolvedDoc struct {
	CallID         string `json:"call_id"`
	Name           string `json:"name"`
	IdempotencyKey string `json:"idempotency_key"`
	TurnID         string `json:"turn_id"`
	Reconcile      string `json:"reconcile"`
}

type resumeDoc struct {
	ThreadID     string          `json:"thread_id"`
	RolloutID    string          `json:"rollout_id"`
	AbortedTurn  string          `json:"aborted_turn"`
	UnknownCalls []callDoc       `json:"unknown_calls"`
	Findings     []findingDoc    `json:"findings"`
	Resent       []string        `json:"resent"`
	Appended     int             `json:"appended"`
	Unresolved   []unresolvedDoc `json:"unresolved"`
	Read         readDoc         `json:"read"`
	State        *stateDoc       `json:"state"`
}

type readDoc struct {
	MirrorOrdinal int64  `json:"mirror_ordinal"`
	BusRecords    int64  `json:"bus_records"`
	BusGets       int64  `json:"bus_gets"`
	MirrorBases   int    `json:"mirror_bases"`
	Fallback      string `json:"fallback"`
}

type reconcileDoc struct {
	ThreadID string `json:"thread_id"`
	Ordinal  int64  `json:"ordinal"`
	CallID   string `json:"call_id"`
	MsgID    string `json:"msg_id"`
	Outcome  string `json:"outcome"`
	Evidence string `json:"evidence"`
	By       string `json:"by"`
}

type gcRolloutDoc struct {
	RolloutID string `json:"rollout_id"`
	ThreadID  string `json:"thread_id"`
	Reason    string `json:"reason"`
}

type gcDoc struct {
	Removed      []gcRolloutDoc `json:"removed"`
	Kept         []gcRolloutDoc `json:"kept"`
	DryRun       bool           `json:"dry_run"`
	SkippedPacks int            `json:"skipped_packs"`
}

type importDoc struct {
	Path         string `json:"path"`
	ThreadID     string `json:"thread_id"`
	RolloutID    string `json:"rollout_id"`
	Records      int    `json:"records"`
	Published    int    `json:"published"`
	Skipped      string `json:"skipped"`
	DamagedLines int    `json:"damaged_lines"`
	TornTail     string `json:"torn_tail"`
	Error        string `json:"error"`
}

type countsDoc struct {
	InterruptedTurns       int `json:"interrupted_turns"`
	UnknownCalls           int `json:"unknown_calls"`
	DeliveriesNotConfirmed int `json:"deliveries_not_confirmed"`
}

type nodeDoc struct {
	ThreadID       string     `json:"thread_id"`
	ParentThreadID string     `json:"parent_thread_id"`
	ForkedFromID   string     `json:"forked_from_id"`
	RolloutID      string     `json:"rollout_id"`
	Rollouts       []string   `json:"rollouts"`
	AgentRole      string     `json:"agent_role"`
	Status         string     `json:"status"`
	Counts         countsDoc  `json:"counts"`
	Unconfirmed    int        `json:"unconfirmed"`
	Children       []*nodeDoc `json:"children"`
}

type problemDoc struct {
	Kind      string `json:"kind"`
	ThreadID  string `json:"thread_id"`
	RolloutID string `json:"rollout_id"`
	Detail    string `json:"detail"`
}

type treeDoc struct {
	Roots    []*nodeDoc   `json:"roots"`
	Orphans  []string     `json:"orphans"`
	Problems []problemDoc `json:"problems"`
}

type pageNodeDoc struct {
	ThreadID       string    `json:"thread_id"`
	ParentThreadID string    `json:"parent_thread_id"`
	ForkedFromID   string    `json:"forked_from_id"`
	RolloutID      string    `json:"rollout_id"`
	Rollouts       []string  `json:"rollouts"`
	AgentRole      string    `json:"agent_role"`
	Status         string    `json:"status"`
	Counts         countsDoc `json:"counts"`
	Unconfirmed    int       `json:"unconfirmed"`
	Depth          int       `json:"depth"`
	ChildCount     int       `json:"child_count"`
}

type treePageDoc struct {
	Nodes      []pageNodeDoc `json:"nodes"`
	Orphans    []string      `json:"orphans"`
	Problems   []problemDoc  `json:"problems"`
	NextCursor string        `json:"next_cursor"`
}

type childResultDoc struct {
	TaskMsgID    string `json:"task_msg_id"`
	ResultMsgID  string `json:"result_msg_id"`
	ParentThread string `json:"parent_thread"`
	ChildThread  string `json:"child_thread"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
}

type deliveryDoc struct {
	MsgID            string `json:"msg_id"`
	IdempotencyKey   string `json:"idempotency_key"`
	FromThread       string `json:"from_thread"`
	ToThread         string `json:"to_thread"`
	Kind             string `json:"kind"`
	InReplyTo        string `json:"in_reply_to"`
	State            string `json:"state"`
	Reason           string `json:"reason"`
	Sends            int    `json:"sends"`
	Receipts         int    `json:"receipts"`
	ReceiptsInEffect int    `json:"receipts_in_effect"`
}

type unconfirmedDoc struct {
	ChildResults []childResultDoc `json:"child_results"`
	Deliveries   []deliveryDoc    `json:"deliveries"`
	Confirmed    int              `json:"confirmed"`
	NextCursor   string           `json:"next_cursor"`
}

type threadDoc struct {
	ThreadID         string `json:"thread_id"`
	ParentThreadID   string `json:"parent_thread_id"`
	ForkedFromID     string `json:"forked_from_id"`
	Source           string `json:"source"`
	AgentRole        string `json:"agent_role"`
	Title            string `json:"title"`
	FirstMessage     string `json:"first_message"`
	Model            string `json:"model"`
	Cwd              string `json:"cwd"`
	CreatedAt        string `json:"created_at"`
	UpdatedAt        string `json:"updated_at"`
	Status           string `json:"status"`
	CurrentRolloutID string `json:"current_rollout_id"`
	Rollouts         int    `json:"rollouts"`
}

type threadsDoc struct {
	Threads    []threadDoc `json:"threads"`
	NextCursor string      `json:"next_cursor"`
}

type verifyProblemDoc struct {
	Kind    string `json:"kind"`
	Line    int    `json:"line"`
	Offset  int64  `json:"offset"`
	Ordinal int64  `json:"ordinal"`
	Detail  string `json:"detail"`
}

type verifyFileDoc struct {
	File          string             `json:"file"`
	OK            bool               `json:"ok"`
	Compressed    bool               `json:"compressed"`
	SizeBytes     int64              `json:"size_bytes"`
	SchemaVersion *int               `json:"schema_version"`
	ReadOnly      bool               `json:"read_only"`
	Lines         int                `json:"lines"`
	Records       int                `json:"records"`
	FirstOrdinal  int64              `json:"first_ordinal"`
	LastOrdinal   int64              `json:"last_ordinal"`
	WithCRC       int                `json:"with_crc"`
	Problems      []verifyProblemDoc `json:"problems"`
	Error         string             `json:"error"`
}

type indexProblemDoc struct {
	RolloutID string `json:"rollout_id"`
	Kind      string `json:"kind"`
	Detail    string `json:"detail"`
}

type verifyDataDoc struct {
	DataDir string `json:"data_dir"`
	OK      bool   `json:"ok"`
	Index   struct {
		Checked  bool              `json:"checked"`
		Note     string            `json:"note"`
		Rollouts int               `json:"rollouts"`
		Lagging  []string          `json:"lagging"`
		Problems []indexProblemDoc `json:"problems"`
	} `json:"index"`
	Files []verifyFileDoc `json:"files"`
	Bus   struct {
		Checked  bool     `json:"checked"`
		Note     string   `json:"note"`
		Rollouts int      `json:"rollouts"`
		Records  int64    `json:"records"`
		Behind   int      `json:"behind"`
		Problems []string `json:"problems"`
	} `json:"bus"`
}

// strictJSON decodes a command's stdout into v, the documented shape, and
// fails the test unless it is exactly that shape: no key the shape does not
// name (in any case), no upper-case key, no null list, nothing after it.
func strictJSON(t *testing.T, what, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: not the documented shape: %v\n%s", what, err, out)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON value on stdout:\n%s", what, out)
	}
	if err := checkShape("$", json.RawMessage(bytes.TrimSpace([]byte(out))), reflect.TypeOf(v).Elem()); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
}

var rawType = reflect.TypeOf(json.RawMessage(nil))

// checkShape walks raw and typ together: object keys must be exactly the
// (lower-case) json names of typ's fields, and lists must be [] not null.
func checkShape(path string, raw json.RawMessage, typ reflect.Type) error {
	null := string(raw) == "null"
	switch {
	case typ == rawType:
		return nil
	case typ.Kind() == reflect.Pointer:
		if null {
			return nil
		}
		return checkShape(path, raw, typ.Elem())
	case typ.Kind() == reflect.Slice:
		if null {
			return fmt.Errorf("%s: a list printed as null, want []", path)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		for i, it := range items {
			if err := checkShape(fmt.Sprintf("%s[%d]", path, i), it, typ.Elem()); err != nil {
				return err
			}
		}
	case typ.Kind() == reflect.Struct:
		if null {
			return fmt.Errorf("%s: an object printed as null", path)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		fields := jsonFields(typ)
		for k, v := range obj {
			if strings.IndexFunc(k, unicode.IsUpper) >= 0 {
				return fmt.Errorf("%s: key %q is not snake_case", path, k)
			}
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("%s: key %q is not documented", path, k)
			}
			if err := checkShape(path+"."+k, v, ft); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields maps the json names of a struct's exported fields to their types.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// TestCheckShape: the checker catches what the issue found.
func TestCheckShape(t *testing.T) {
	type shape struct {
		Thread string   `json:"thread_id"`
		Sends  []string `json:"sends"`
	}
	for _, bad := range []string{`{"Thread":"a","sends":[]}`, `{"thread_id":"a","sends":null}`, `{"thread_id":"a","other":1,"sends":[]}`} {
		if err := checkShape("$", json.RawMessage(bad), reflect.TypeOf(shape{})); err == nil {
			t.Errorf("%s passed", bad)
		}
	}
	if err := checkShape("$", json.RawMessage(`{"thread_id":"a","sends":[]}`), reflect.TypeOf(shape{})); err != nil {
		t.Error(err)
	}
}
