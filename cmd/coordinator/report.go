package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/logbook-agents/logbook/internal/replay"
)

// The people-readable form of a replayed State (replay, and later show).
// --json is the form for programs; this one may change.

const (
	textWidth  = 100 // runes of an item's text on one line
	worldWidth = 400 // runes of the world state before --full
)

// writeStateReport renders st, the state replayed from source.
func writeStateReport(w io.Writer, source string, st *replay.State, full bool) {
	fmt.Fprintf(w, "Replay of %s\n\n", source)
	writeIdentity(w, st)
	writeSettings(w, st, full)
	writeHistory(w, st.History, full)
	writeTurns(w, st.Turns, full)
	writeDangling(w, st.DanglingCalls)
	writeWarnings(w, st.Warnings)
	writeReplayStats(w, &st.Replay)
}

func writeIdentity(w io.Writer, st *replay.State) {
	t := newTable(w)
	fmt.Fprintln(t, "Identity")
	fmt.Fprintf(t, "  thread\t%s\n", orDash(st.ThreadID))
	fmt.Fprintf(t, "  rollout\t%s\n", orDash(st.RolloutID))
	fmt.Fprintf(t, "  parent\t%s\n", orDash(st.ParentThreadID))
	if st.ForkedFromID != "" {
		fmt.Fprintf(t, "  forked from\t%s\n", st.ForkedFromID)
	}
	if st.SessionID != "" {
		fmt.Fprintf(t, "  session\t%s\n", st.SessionID)
	}
	fmt.Fprintf(t, "  source\t%s\n", orDash(st.Source))
	if st.AgentRole != "" {
		fmt.Fprintf(t, "  agent role\t%s\n", st.AgentRole)
	}
	fmt.Fprintf(t, "  mode\t%s\n", orDash(st.HistoryMode))
	schema := strconv.Itoa(st.SchemaVersion)
	if st.SchemaVersion == 0 {
		schema += " (Codex rollout)"
	}
	fmt.Fprintf(t, "  schema\t%s\n", schema)
	ro := "no"
	if st.ReadOnly {
		ro = "yes: written by a newer schema version; it can be shown, never resumed or appended to"
	}
	fmt.Fprintf(t, "  read-only\t%s\n", ro)
	t.Flush()
	fmt.Fprintln(w)
}

func writeSettings(w io.Writer, st *replay.State, full bool) {
	t := newTable(w)
	fmt.Fprintln(t, "Settings")
	fmt.Fprintf(t, "  model\t%s\n", orDash(st.Model))
	fmt.Fprintf(t, "  approval\t%s\n", orDash(st.ApprovalPolicy))
	if len(st.SandboxPolicy) > 0 {
		fmt.Fprintf(t, "  sandbox\t%s\n", compactJSON(st.SandboxPolicy))
	}
	if st.Effort != "" {
		fmt.Fprintf(t, "  effort\t%s\n", st.Effort)
	}
	fmt.Fprintf(t, "  cwd\t%s\n", orDash(st.Cwd))
	fmt.Fprintf(t, "  window\t%d\n", st.Window)
	t.Flush()
	fmt.Fprintln(w)

	t = newTable(w)
	world := compactJSON(st.WorldState)
	switch {
	case world == "-":
		world = "none in effect (no full baseline since the last compaction)"
	case !full:
		world = clip(world, worldWidth)
	}
	fmt.Fprintf(t, "World state\t%s\n", world)
	fmt.Fprintf(t, "Token usage\t%s\n", tokenUsage(st.TokenUsage))
	fmt.Fprintf(t, "Tokens spent\t%s\n", tokens(st.TokensSpent))
	t.Flush()
	fmt.Fprintln(w)
}

// usage is one of Codex's token usage objects.
type usage struct {
	Input     *int64 `json:"input_tokens"`
	Cached    *int64 `json:"cached_input_tokens"`
	Output    *int64 `json:"output_tokens"`
	Reasoning *int64 `json:"reasoning_output_tokens"`
	Total     *int64 `json:"total_tokens"`
}

// tokens renders a usage object: its total and its parts.
func tokens(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "none recorded"
	}
	var u usage
	if json.Unmarshal(raw, &u) != nil || u.Total == nil {
		return clip(compactJSON(raw), textWidth)
	}
	var parts []string
	for _, p := range []struct {
		name string
		v    *int64
	}{{"input", u.Input}, {"cached", u.Cached}, {"output", u.Output}, {"reasoning", u.Reasoning}} {
		if p.v != nil {
			parts = append(parts, p.name+" "+num(*p.v))
		}
	}
	s := num(*u.Total)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// tokenUsage renders token_usage, a token_count's info: the totals in
// effect, the last request, the context window.
func tokenUsage(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "none recorded"
	}
	var info struct {
		Total  json.RawMessage `json:"total_token_usage"`
		Last   json.RawMessage `json:"last_token_usage"`
		Window *int64          `json:"model_context_window"`
	}
	if json.Unmarshal(raw, &info) != nil || info.Total == nil {
		return clip(compactJSON(raw), textWidth)
	}
	s := "total " + tokens(info.Total)
	if len(info.Last) > 0 && string(info.Last) != "null" {
		var last usage
		if json.Unmarshal(info.Last, &last) == nil && last.Total != nil {
			s += "; last " + num(*last.Total)
		}
	}
	if info.Window != nil {
		s += "; context window " + num(*info.Window)
	}
	return s
}

func writeHistory(w io.Writer, items []json.RawMessage, full bool) {
	fmt.Fprintf(w, "History: %s in effect\n", plural(len(items), "item", "items"))
	t := newTable(w)
	head, tail := shown(len(items), full)
	for i, raw := range items {
		if i == head && tail > head {
			fmt.Fprintf(t, "  …\t\t%s elided (--full shows all)\n", plural(tail-head, "item", "items"))
		}
		if i >= head && i < tail {
			continue
		}
		kind, text := describeItem(raw)
		fmt.Fprintf(t, "  %d\t%s\t%s\n", i, kind, clip(text, textWidth))
	}
	t.Flush()
	fmt.Fprintln(w)
}

// item holds the response item fields the history listing shows.
type item struct {
	Type           string          `json:"type"`
	Role           string          `json:"role"`
	Name           string          `json:"name"`
	CallID         string          `json:"call_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	Arguments      json.RawMessage `json:"arguments"`
	Input          json.RawMessage `json:"input"`
	Output         json.RawMessage `json:"output"`
	Content        json.RawMessage `json:"content"`
	Summary        json.RawMessage `json:"summary"`
	Encrypted      json.RawMessage `json:"encrypted_content"`
	Action         json.RawMessage `json:"action"`
	Status         string          `json:"status"`
}

// describeItem returns an item's kind (type, or type/role) and a text:
// what was said, or which call with which arguments.
func describeItem(raw json.RawMessage) (kind, text string) {
	var it item
	if err := json.Unmarshal(raw, &it); err != nil || it.Type == "" {
		return "?", compactJSON(raw)
	}
	kind = it.Type
	switch it.Type {
	case "message":
		if it.Role != "" {
			kind += "/" + it.Role
		}
		return kind, texts(it.Content, "(no text)")
	case "reasoning":
		if s := texts(it.Summary, ""); s != "" {
			return kind, s
		}
		if len(it.Encrypted) > 0 && string(it.Encrypted) != "null" {
			return kind, "(encrypted)"
		}
		return kind, texts(it.Content, "(no summary)")
	case "function_call", "custom_tool_call":
		s := orDash(it.Name) + " call_id=" + orDash(it.CallID)
		if it.IdempotencyKey != "" {
			s += " idempotency_key=" + it.IdempotencyKey
		}
		args := it.Arguments
		if args == nil {
			args = it.Input
		}
		if a := stringOrJSON(args); a != "" {
			s += " " + a
		}
		return kind, s
	case "function_call_output", "custom_tool_call_output":
		return kind, "call_id=" + orDash(it.CallID) + " " + stringOrJSON(it.Output)
	case "web_search_call":
		var a struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(it.Action, &a) == nil && a.Query != "" {
			return kind, a.Query
		}
		return kind, orDash(it.Status)
	}
	return kind, compactJSON(raw)
}

// texts joins the text members of a content or summary array.
func texts(raw json.RawMessage, none string) string {
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return none
	}
	var out []string
	for _, p := range parts {
		switch {
		case p.Text != "":
			out = append(out, p.Text)
		case p.Type != "":
			out = append(out, "["+p.Type+"]")
		}
	}
	if len(out) == 0 {
		return none
	}
	return strings.Join(out, " ")
}

// stringOrJSON shows a JSON string as its text and anything else as JSON.
func stringOrJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compactJSON(raw)
}

func writeTurns(w io.Writer, turns []replay.Turn, full bool) {
	fmt.Fprintf(w, "Turns: %s in the current window\n", plural(len(turns), "turn", "turns"))
	if len(turns) == 0 {
		fmt.Fprintln(w)
		return
	}
	t := newTable(w)
	fmt.Fprintln(t, "  TURN\tSTATUS\tREASON\tUSER\tORDINAL")
	head, tail := shown(len(turns), full)
	for i, tn := range turns {
		if i == head && tail > head {
			fmt.Fprintf(t, "  …\t%s elided (--full shows all)\n", plural(tail-head, "turn", "turns"))
		}
		if i >= head && i < tail {
			continue
		}
		ord := "-"
		if tn.Ordinal > 0 {
			ord = strconv.FormatInt(tn.Ordinal, 10)
		}
		fmt.Fprintf(t, "  %s\t%s\t%s\t%s\t%s\n", tn.TurnID, tn.Status, orDash(tn.Reason), yesNo(tn.User), ord)
	}
	t.Flush()
	fmt.Fprintln(w)
}

func writeDangling(w io.Writer, calls []replay.Call) {
	if len(calls) == 0 {
		fmt.Fprintf(w, "Dangling calls: none\n\n")
		return
	}
	fmt.Fprintf(w, "Dangling calls: %s, outcome unknown — not failed, not pending; the effect may have happened\n",
		plural(len(calls), "call", "calls"))
	t := newTable(w)
	fmt.Fprintln(t, "  CALL\tNAME\tIDEMPOTENCY KEY\tTURN")
	for _, c := range calls {
		key := c.IdempotencyKey
		if key == "" {
			key = "none (outcome cannot be probed)"
		}
		fmt.Fprintf(t, "  %s\t%s\t%s\t%s\n", c.CallID, orDash(c.Name), key, orDash(c.TurnID))
	}
	t.Flush()
	fmt.Fprintln(w)
}

func writeWarnings(w io.Writer, warnings []replay.Warning) {
	if len(warnings) == 0 {
		fmt.Fprintf(w, "Warnings: none\n\n")
		return
	}
	fmt.Fprintf(w, "Warnings: %d\n", len(warnings))
	t := newTable(w)
	for _, wn := range warnings {
		fmt.Fprintf(t, "  %s\t%s\t%s\n", wn.Code, where(wn.Ordinal, wn.Line), oneLine(wn.Message))
	}
	t.Flush()
	fmt.Fprintln(w)
}

// where names a place in a rollout by ordinal and line, whichever are known.
func where(ordinal int64, line int) string {
	var parts []string
	if ordinal > 0 {
		parts = append(parts, "ordinal "+strconv.FormatInt(ordinal, 10))
	}
	if line > 0 {
		parts = append(parts, "line "+strconv.Itoa(line))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func writeReplayStats(w io.Writer, s *replay.Stats) {
	start := "start offset " + num(s.StartOffset)
	if s.StartOrdinal > 0 {
		start = fmt.Sprintf("start ordinal %d (offset %s)", s.StartOrdinal, num(s.StartOffset))
	}
	torn := "no torn tail"
	if s.TornTail {
		torn = "torn tail ignored"
	}
	fmt.Fprintf(w, "Replay: %s, %s read, %s, %s, %s",
		s.Mode, plural(s.RecordsRead, "record", "records"), start, plural(s.CorruptLines, "corrupt line", "corrupt lines"), torn)
	if s.UnknownTypes > 0 {
		fmt.Fprintf(w, ", %s of unknown types kept and ignored", plural(s.UnknownTypes, "record", "records"))
	}
	fmt.Fprintln(w)
	if len(s.Corruption) == 0 {
		return
	}
	t := newTable(w)
	for _, c := range s.Corruption {
		region := "before the dependency region: harmless"
		switch {
		case c.Kind == "torn_tail":
			region = "a write cut short: ignored"
		case c.InRegion:
			region = "inside the dependency region: skipped (--salvage)"
		}
		place := where(c.Ordinal, c.Line)
		if place == "-" {
			place = "offset " + num(c.Offset)
		}
		fmt.Fprintf(t, "  %s\t%s\t%s\t%s\n", c.Kind, place, region, oneLine(c.Detail))
	}
	t.Flush()
}
