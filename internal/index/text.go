package index

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// Text helpers of the projection: timestamps, excerpts, injected turns.

// normTime puts a record timestamp in one sortable form (UTC, milliseconds);
// "" when it does not parse.
func normTime(ts string) string {
	if len(ts) == len(rollout.TimeLayout) && ts[len(ts)-1] == 'Z' && ts[10] == 'T' && ts[19] == '.' {
		return ts // already in the layout Logbook writes
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ""
	}
	return t.UTC().Format(rollout.TimeLayout)
}

// injected reports whether a user-role message is no title: empty, or
// context Codex injected (replay.IsContextual, the rule legacy compaction
// uses too).
func injected(text string) bool {
	return strings.TrimSpace(text) == "" || replay.IsContextual(text)
}

// textOf returns the first of keys that is a string member of payload, or
// the raw JSON of the first present one.
func textOf(payload []byte, keys ...string) string {
	for _, k := range keys {
		v := rollout.Lookup(payload, k)
		if v == nil {
			continue
		}
		if s, ok := rollout.LookupString(payload, k); ok {
			return s
		}
		return string(v)
	}
	return ""
}

// summaryText joins a reasoning item's summary texts.
func summaryText(payload []byte) string {
	var r struct {
		Summary []struct {
			Text string `json:"text"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(payload, &r); err != nil {
		return ""
	}
	var parts []string
	for _, s := range r.Summary {
		if s.Text != "" {
			parts = append(parts, s.Text)
		}
	}
	return strings.Join(parts, " ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clipRunes(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}
