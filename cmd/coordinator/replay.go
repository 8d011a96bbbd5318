package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/replay"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/tree"
)

type replayFlags struct {
	json, salvage, naive, full bool
	model                      string
	src                        sourceFlags
}

func newReplayCmd() *cobra.Command {
	var fl replayFlags
	cmd := &cobra.Command{
		Use:   "replay FILE | replay --rollouts DIR THREAD | replay --data DIR THREAD",
		Short: "Rebuild a thread's state from one rollout file",
		Long: `Replay rebuilds a thread from one rollout file (.jsonl or .jsonl.zst), as a
resume would, and shows what a new session starts from: identity, settings,
world state, token usage, the model history in effect, the turns of the
current window, the calls whose outcome is unknown, and warnings.

By default the fast path runs: it scans back from the tail to the newest
checkpoint in effect and replays only that region ("records read" shows the
cost). --naive folds the whole log forward instead; both give the same state.

Damage: a torn last line (a write cut short) is ignored. Other damage before
the region the state depends on is harmless (the fast path does not even read
it; verify checks every line). Damage inside the region fails the replay,
naming the line, because the lost record may have been a rollback marker or a
setting; --salvage skips it with a warning instead.

Dangling calls are "unknown": not failed, not pending. Their effect may have
happened; nothing here retries them.

With --rollouts DIR (any directory of rollout files) or --data DIR (a data
dir's mirror), the argument is a THREAD id: its current rollout is found
(following reverts) and read as its view (a fork by reference or a revert
joins the frozen prefix it names with its own records).

Exit status: 0 when the state was rebuilt (warnings included), 1 when the file
is missing, not a rollout, or damaged where it matters, 2 for a usage error.`,
		Example: `  # A people-readable report
  coordinator replay testdata/examples/mid-turn-compaction.jsonl

  # The machine-readable state, as resume uses it
  coordinator replay --json testdata/examples/chapter-rollback-2.jsonl

  # A Codex session, every history item, warning if resumed with another model
  coordinator replay --full --model gpt-5 ~/.codex/sessions/2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl

  # Continue past damage inside the dependency region
  coordinator replay --salvage damaged.jsonl`,
		Args: checkedArgs(oneFile, fl.src.check),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fl.src.rollouts != "" || fl.src.data != "" {
				return runReplayThread(cmd.OutOrStdout(), args[0], fl)
			}
			return runReplay(cmd.OutOrStdout(), args[0], fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.json, "json", false, "print the state as JSON (thread_id, history, turns, dangling_calls, warnings, replay, ...)")
	f.BoolVar(&fl.salvage, "salvage", false, "skip damage inside the dependency region with a warning instead of failing")
	f.BoolVar(&fl.naive, "naive", false, "fold the whole log forward instead of the fast backward scan")
	f.StringVar(&fl.model, "model", "", "the model `M` a resume would use; warns (model_changed) when it differs from the last one in effect")
	f.BoolVar(&fl.full, "full", false, "list every history item and turn (default: the first 5 and the last 20)")
	fl.src.register(cmd)
	return cmd
}

func runReplay(w io.Writer, path string, fl replayFlags) error {
	log, err := openRollout(path)
	if err != nil {
		return err
	}
	return replayLog(w, path, log, fl)
}

// runReplayThread replays a thread's current view from a directory of
// rollouts.
func runReplayThread(w io.Writer, thread string, fl replayFlags) error {
	c, dir, err := fl.src.load()
	if err != nil {
		return err
	}
	threads := c.Threads()
	id, err := tree.Resolve(threads, thread)
	if err != nil {
		return fmt.Errorf("%w in %s (coordinator tree --rollouts %s lists them)", err, dir, dir)
	}
	th := threads[id]
	log, _, err := c.View(th.Current.ID)
	if err != nil {
		return err
	}
	return replayLog(w, log.Name(), log, fl)
}

func replayLog(w io.Writer, path string, log rollout.Log, fl replayFlags) error {
	opt := replay.Options{Salvage: fl.salvage, Model: fl.model}
	fn := replay.Fast
	if fl.naive {
		fn = replay.Naive
	}
	st, err := fn(log, opt)
	if err != nil {
		return replayError(log, err)
	}
	if fl.json {
		out, err := st.MarshalIndent()
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	var buf bytes.Buffer
	writeStateReport(&buf, path, st, fl.full)
	_, err = w.Write(buf.Bytes())
	return err
}

// replayError says what to do about a failed replay. Errors from replay
// already name the file, the line and, for damage, --salvage.
func replayError(log rollout.Log, err error) error {
	if errors.Is(err, rollout.ErrNoSessionMeta) {
		return notRollout(log)
	}
	return fileError(log.Name(), err)
}
