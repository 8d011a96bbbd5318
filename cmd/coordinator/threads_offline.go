package main

import (
	"bytes"
	"io"

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
		all = append(all, t)
	}
	page, err := index.PageOf(all, index.ThreadQuery{Search: fl.search, Limit: fl.limit, Cursor: fl.cursor})
	if err != nil {
		return err
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
