package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/tree"
)

// runThreadsOffline lists the threads of any directory of rollout files, with
// no index and no server: the same page and cursor rules as the index.
func runThreadsOffline(w io.Writer, fl threadsFlags) error {
	src := sourceFlags{rollouts: fl.rollouts}
	c, _, err := src.load()
	if err != nil {
		return err
	}
	var all []index.Thread
	for id, th := range c.Threads() {
		first := c.Rollouts[th.Rollouts[0]]
		cur := th.Current
		t := index.Thread{ID: id, ParentThreadID: cur.Meta.Parent(), ForkedFromID: cur.Meta.ForkedFromID, Source: cur.Meta.Source.Kind,
			AgentRole: cur.Meta.AgentRole, Title: titleOf(c, th), FirstMessage: titleOf(c, th), Cwd: cur.Meta.Cwd,
			CreatedAt: first.Created, UpdatedAt: cur.Updated, CurrentRolloutID: cur.ID, Rollouts: len(th.Rollouts)}
		if st := th.State; st != nil {
			t.Model, t.Cwd = st.Model, st.Cwd
			if n := len(st.Turns); n > 0 {
				t.Status = st.Turns[n-1].Status
			}
		}
		if matches(t, fl.search) {
			all = append(all, t)
		}
	}
	sort.Slice(all, func(i, j int) bool { return newer(all[i], all[j]) })
	start := 0
	if fl.cursor != "" {
		created, id, err := decodeOfflineCursor(fl.cursor)
		if err != nil {
			return err
		}
		mark := index.Thread{ID: id, CreatedAt: created}
		start = sort.Search(len(all), func(i int) bool { return newer(mark, all[i]) })
	}
	end := min(start+fl.limit, len(all))
	page := index.ThreadPage{Threads: all[start:end]}
	if end < len(all) {
		last := all[end-1]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(last.CreatedAt + "\x00" + last.ID))
	}
	if page.Threads == nil {
		page.Threads = []index.Thread{}
	}
	if fl.json {
		return writeJSON(w, threadsOf(page))
	}
	var buf bytes.Buffer
	writeThreads(&buf, page, fl)
	_, err = w.Write(buf.Bytes())
	return err
}

// titleOf is a thread's title: its first rollout's first user message.
func titleOf(c *tree.Corpus, th *tree.Thread) string {
	for _, id := range th.Rollouts {
		if t := c.Rollouts[id].Title; t != "" {
			return t
		}
	}
	return ""
}

// newer orders threads newest first: created time, then thread id.
func newer(a, b index.Thread) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt > b.CreatedAt
	}
	return a.ID > b.ID
}

func matches(t index.Thread, search string) bool {
	hay := strings.ToLower(strings.Join([]string{t.Title, t.FirstMessage, t.Cwd, t.Model}, "\n"))
	for _, w := range strings.Fields(strings.ToLower(search)) {
		if !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}

func decodeOfflineCursor(c string) (created, id string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if parts := strings.SplitN(string(b), "\x00", 2); len(parts) == 2 {
			return parts[0], parts[1], nil
		}
	}
	return "", "", fmt.Errorf("--cursor %q is not a cursor printed by threads --rollouts", c)
}
