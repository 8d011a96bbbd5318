package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// A legacy compaction (no replacement_history) is rebuilt as Codex rebuilds
// it: the user messages of the history before it, newest first within a
// budget, then its summary as a user message.

// summaryPrefix starts every summary Codex writes; such messages are not user
// messages when a later compaction collects them.
const summaryPrefix = "Another language model started to solve this problem and produced a summary of its thinking process."

// userMessageBudget is Codex's COMPACT_USER_MESSAGE_MAX_TOKENS, with its
// estimate of 4 bytes a token.
const userMessageBudget = 20_000 * 4

// contextualPrefixes mark user-role messages Codex injects (environment,
// instructions, notifications): they are context, not user intent.
var contextualPrefixes = []string{
	"<environment_context>", "<user_instructions>", "<turn_aborted>",
	"<subagent_notification>", "<context_update>", "# agents.md instructions",
}

// IsContextual reports whether a user-role message is injected context
// (environment, instructions, notifications, an earlier summary) rather than
// something the user said.
func IsContextual(text string) bool { return isContextual(text) }

// isContextual: the markers match case-insensitively and the summary's
// prefix exactly (as Codex writes both), after leading white space.
func isContextual(text string) bool {
	text = strings.TrimLeft(text, " \t\r\n")
	t := strings.ToLower(text)
	for _, p := range contextualPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return strings.HasPrefix(text, summaryPrefix)
}

// collectUserMessages returns the texts of the user messages in history.
func collectUserMessages(history []json.RawMessage) []string {
	var out []string
	for _, raw := range history {
		if t, _ := rollout.LookupString(raw, "type"); t != rollout.ItemMessage {
			continue
		}
		if role, _ := rollout.LookupString(raw, "role"); role != "user" {
			continue
		}
		var it rollout.ResponseItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		text := it.Text()
		if text == "" || isContextual(text) {
			continue
		}
		out = append(out, text)
	}
	return out
}

// legacyHistory builds the replacement history of a legacy compaction.
func legacyHistory(users []string, summary string) []json.RawMessage {
	var selected []string
	remaining := userMessageBudget
	for i := len(users) - 1; i >= 0 && remaining > 0; i-- {
		m := users[i]
		if len(m) <= remaining {
			selected = append(selected, m)
			remaining -= len(m)
			continue
		}
		cut := remaining
		for cut > 0 && !utf8.RuneStart(m[cut]) {
			cut--
		}
		selected = append(selected, m[:cut]+"…[truncated]")
		break
	}
	out := make([]json.RawMessage, 0, len(selected)+1)
	for i := len(selected) - 1; i >= 0; i-- {
		out = append(out, userItem(selected[i]))
	}
	if summary == "" {
		summary = "(no summary available)"
	}
	return append(out, userItem(summary))
}

func userItem(text string) json.RawMessage {
	item := struct {
		Type    string                   `json:"type"`
		Role    string                   `json:"role"`
		Content []rollout.ContentElement `json:"content"`
	}{rollout.ItemMessage, "user", []rollout.ContentElement{{Type: "input_text", Text: text}}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(item)
	return bytes.TrimRight(buf.Bytes(), "\n")
}
