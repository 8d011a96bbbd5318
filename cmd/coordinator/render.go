package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Output helpers shared by the commands. Commands render into a buffer and
// write it once, so a failed write is one error and a failed command prints
// nothing half-way.

// writeJSON writes v as indented JSON without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// newTable aligns tab-separated columns; the last column may be ragged.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// oneLine folds every run of white space (newlines included) into one
// space, so any text fits one output line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip puts s on one line and cuts it to at most n runes, marking the cut.
func clip(s string, n int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// orDash shows an empty value as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// yesNo shows a flag.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// num formats n with thousands separators.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// plural is "1 item" or "2 items".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return num(int64(n)) + " " + many
}

// Elision of long lists: the first listHead and the last listTail rows are
// shown, the rest counted, unless the user asks for all of them.
const (
	listHead = 5
	listTail = 20
)

// shown returns the rows of a list of n to print: [0, head) and [tail, n);
// tail > head means the rows between are elided.
func shown(n int, all bool) (head, tail int) {
	if all || n <= listHead+listTail+1 {
		return n, n
	}
	return listHead, n - listTail
}

// compactJSON returns raw JSON on one line, or "-" for none or null.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "-"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}
