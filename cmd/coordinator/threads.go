package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/index"
)

type threadsFlags struct {
	data, search, cursor string
	rollouts             string // any directory of rollout files: no index, no server
	dataGiven            bool   // --data was given: the next-page hint repeats it
	limit                int
	json                 bool
}

func newThreadsCmd() *cobra.Command {
	var fl threadsFlags
	cmd := &cobra.Command{
		Use:   "threads [--search TEXT] [--limit N] [--cursor C]",
		Short: "List and search the threads of a data dir, newest first",
		Long: `Threads lists the threads of a data dir from its index, newest first (by
creation time, then thread id), one page at a time.

--search keeps the threads whose id, title (the first user message), first
message, working directory or model holds every word of TEXT, ignoring case.
With --rollouts DIR the threads come from any directory of rollout files
instead (no index, no server), paged and searched the same way.
A page ends with the cursor of the next one: pass it to --cursor, with the
same --search. Paging is stable: threads created while you page never make a
page skip or repeat a thread.

The index is read-only here and may lag the mirror by the last few records;
it works whether or not a coordinator is serving the data dir.

With --rollouts DIR, the threads of any directory of rollout files are listed
instead (recursively; .jsonl and .jsonl.zst, a Codex sessions directory
included), with no index and no server, by the same rules.

Exit status: 0 when the page was listed (even an empty one), 1 when the data
dir or its index cannot be read or the cursor is not valid, 2 for a usage
error.`,
		Example: `  coordinator threads
  coordinator threads --search "login timeout" --limit 50
  coordinator threads --json --limit 5
  coordinator threads --data /srv/logbook --search gpt-5
  coordinator threads --rollouts ~/.codex/sessions`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("threads takes no arguments, got %s (search with --search)", strings.Join(args, " "))
			}
			if fl.limit < 1 || fl.limit > index.MaxLimit {
				return fmt.Errorf("--limit %d: must be from 1 to %d", fl.limit, index.MaxLimit)
			}
			if fl.rollouts != "" && fl.data != "" {
				return fmt.Errorf("give --rollouts or --data, not both")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if fl.rollouts != "" {
				return runThreadsOffline(cmd.OutOrStdout(), fl)
			}
			return runThreads(cmd.Context(), cmd.OutOrStdout(), fl)
		},
	}
	f := cmd.Flags()
	addDataFlag(cmd, &fl.data)
	f.StringVar(&fl.rollouts, "rollouts", "", "list the threads of any directory of rollout files (`DIR`, recursive) instead of a data dir's index")
	f.StringVar(&fl.search, "search", "", "keep threads whose id, title, first message, cwd or model holds every word of `TEXT`")
	f.IntVar(&fl.limit, "limit", index.DefaultLimit, "`N` threads per page (at most "+strconv.Itoa(index.MaxLimit)+")")
	f.StringVar(&fl.cursor, "cursor", "", "the next page's cursor `C`, as printed at the end of a page")
	f.BoolVar(&fl.json, "json", false, `print {"threads": [...], "next_cursor": "..."}`)
	return cmd
}

func runThreads(ctx context.Context, w io.Writer, fl threadsFlags) error {
	var err error
	fl.dataGiven = fl.data != ""
	if fl.data, err = resolveDataDir(fl.data); err != nil {
		return err
	}
	r, err := openReader(ctx, fl.data)
	if err != nil {
		return err
	}
	defer r.Close()
	page, err := r.Threads(ctx, index.ThreadQuery{Search: fl.search, Limit: fl.limit, Cursor: fl.cursor})
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

func writeThreads(w io.Writer, page index.ThreadPage, fl threadsFlags) {
	if len(page.Threads) == 0 {
		switch {
		case fl.cursor != "":
			fmt.Fprintln(w, "No more threads.")
		case fl.search != "":
			fmt.Fprintf(w, "No thread matches %q.\n", fl.search)
		default:
			fmt.Fprintln(w, "No threads indexed yet.")
		}
		return
	}
	t := newTable(w)
	fmt.Fprintln(t, "THREAD\tCREATED (UTC)\tUPDATED (UTC)\tSTATUS\tMODEL\tTITLE")
	for _, th := range page.Threads {
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", th.ID, shortTime(th.CreatedAt), shortTime(th.UpdatedAt), orDash(th.Status),
			orDash(th.Model), orDash(clip(th.Title, 60)))
	}
	t.Flush()
	if page.NextCursor == "" {
		fmt.Fprintf(w, "%s; no more pages.\n", plural(len(page.Threads), "thread", "threads"))
		return
	}
	next := "coordinator threads"
	if fl.dataGiven {
		next += " --data " + fl.data
	}
	if fl.rollouts != "" {
		next += " --rollouts " + fl.rollouts
	}
	if fl.search != "" {
		next += " --search " + strconv.Quote(fl.search)
	}
	if fl.limit != index.DefaultLimit {
		next += " --limit " + strconv.Itoa(fl.limit)
	}
	fmt.Fprintf(w, "%s; next page: %s --cursor %s\n", plural(len(page.Threads), "thread", "threads"), next, page.NextCursor)
}

// shortTime shows an index timestamp to the second, in UTC.
func shortTime(ts string) string {
	if len(ts) < 19 {
		return orDash(ts)
	}
	return ts[:10] + " " + ts[11:19]
}
