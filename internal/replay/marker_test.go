package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// withMarker replaces the chapter's rollback marker (record 25) by one whose
// num_turns is the raw JSON value v.
func withMarker(v string) []rollout.Record {
	recs := chapterLog(1)
	b := &rollout.Builder{Next: 25}
	recs[24] = b.Record(rollout.TypeEventMsg, []byte(`{"type":"thread_rolled_back","num_turns":`+v+`}`))
	return recs
}

func historyJSON(t *testing.T, st *State) string {
	t.Helper()
	b, err := json.Marshal(st.History)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMarkerCounts: a num_turns beyond int64 rolls back everything after the
// first turn, like any count above the turns in effect; a negative, zero or
// non-integer one cuts nothing and says so, on both paths.
func TestMarkerCounts(t *testing.T) {
	everything := rollout.MemOf("all", chapterLog(100))
	for name, run := range map[string]func(rollout.Log, Options) (*State, error){"fast": Fast, "naive": Naive} {
		want, err := run(everything, Options{})
		if err != nil {
			t.Fatal(err)
		}
		none, err := run(rollout.MemOf("none", chapterLog(1)[:24]), Options{})
		if err != nil {
			t.Fatal(err)
		}
		huge, err := run(rollout.MemOf("huge", withMarker("100000000000000000000000")), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, w := historyJSON(t, huge), historyJSON(t, want); got != w {
			t.Errorf("%s: huge num_turns: history\n%s\nwant (rollback 100)\n%s", name, got, w)
		}
		for _, v := range []string{"-3", "0", `"two"`, "1.5"} {
			st, err := run(rollout.MemOf("bad", withMarker(v)), Options{})
			if err != nil {
				t.Fatalf("%s %s: %v", name, v, err)
			}
			if got, w := historyJSON(t, st), historyJSON(t, none); got != w {
				t.Errorf("%s: num_turns %s cut something: history\n%s\nwant\n%s", name, v, got, w)
			}
			found := false
			for _, w := range st.Warnings {
				if w.Code == WarnBadPayload && w.Ordinal == 25 && strings.Contains(w.Message, "num_turns "+v) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: num_turns %s: no bad_payload warning at ordinal 25 in %+v", name, v, st.Warnings)
			}
		}
	}
}

// TestIsContextual: the one rule for injected user-role messages: markers
// case-insensitively, Codex's summary prefix exactly, after leading white
// space; what a person typed is not context.
func TestIsContextual(t *testing.T) {
	for text, want := range map[string]bool{
		"<environment_context>cwd</environment_context>":       true,
		"\n  <USER_INSTRUCTIONS>be brief":                      true,
		"# AGENTS.md instructions for /repo":                   true,
		summaryPrefix + "\nit did things":                      true,
		"  " + summaryPrefix:                                   true,
		"another language model started to solve this problem": false,
		"fix the login timeout":                                false,
		"please read <environment_context> and tell me":        false,
		"": false,
	} {
		if got := IsContextual(text); got != want {
			t.Errorf("IsContextual(%q) = %v, want %v", text, got, want)
		}
	}
}
