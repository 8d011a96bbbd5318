package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/replay/gen"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream/serve"
)

// dataDir lays out a mirror-like data dir: the Codex sessions and two
// examples, each named by its rollout id, and n generated rollouts.
func dataDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	rd := datadir.RolloutsDir(dir)
	if err := os.MkdirAll(rd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(codexFiles(t), example("mid-turn-compaction"), example("chapter-rollback-2")) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		line, _, _ := bytes.Cut(data, []byte("\n"))
		rec, _ := rollout.DecodeLine(line)
		m, _ := rollout.Decode[rollout.SessionMeta](&rec)
		if err := os.WriteFile(filepath.Join(rd, m.Rollout()+datadir.JSONLExt), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for s := 1; s <= n; s++ {
		mem := rollout.MemOf("", gen.All(gen.Config{Seed: int64(s), Records: 300}))
		if err := os.WriteFile(filepath.Join(rd, fmt.Sprintf("rollout-%d.jsonl", s)), mem.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReindexThreadsShowVerify(t *testing.T) {
	dir := dataDir(t, 3)
	r := runCLI(t, "threads", "--data", dir)
	r.wantOneLineError(t, "has no index yet", "coordinator reindex --data "+dir)

	r = runCLI(t, "reindex", "--data", dir)
	r.wantCode(t, exitOK)
	r.wantOut(t, "Reindexed "+dir+": 11 rollouts")

	r = runCLI(t, "threads", "--data", dir, "--limit", "4")
	r.wantCode(t, exitOK)
	r.wantOut(t, "THREAD", "thread-M", "修复登录超时", "4 threads; next page: coordinator threads --data "+dir+" --limit 4 --cursor ")
	cur := r.stdout[strings.LastIndex(r.stdout, "--cursor ")+9 : len(r.stdout)-1]
	r = runCLI(t, "threads", "--data", dir, "--limit", "4", "--cursor", cur, "--json")
	r.wantCode(t, exitOK)
	var page index.ThreadPage
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Threads) != 4 {
		t.Fatalf("second page: %v %s", err, r.stdout)
	}
	r = runCLI(t, "threads", "--data", dir, "--search", "修复")
	r.wantOut(t, "thread-A2", "1 thread; no more pages.")
	runCLI(t, "threads", "--data", dir, "--cursor", "nonsense").wantOneLineError(t, "invalid cursor")
	runCLI(t, "threads", "--data", dir, "--limit", "0").wantCode(t, exitUsage)

	// A thread id (or a prefix of one) is found by --search, and the index
	// and a plain directory of the same files page alike: same threads,
	// same order, same cursors (one paging rule, index.PageOf).
	for _, src := range [][]string{{"--data", dir}, {"--rollouts", datadir.RolloutsDir(dir)}} {
		r = runCLI(t, append([]string{"threads", "--search", "019c8bfe-ec25"}, src...)...)
		r.wantOut(t, "019c8bfe-ec25-79e0-97d7-bda6a9c575ff", "1 thread; no more pages.")
	}
	pages := func(src ...string) (out []string) {
		cursor := ""
		for range 10 {
			args := append([]string{"threads", "--json", "--limit", "3", "--search", "a"}, src...)
			if cursor != "" {
				args = append(args, "--cursor", cursor)
			}
			r := runCLI(t, args...)
			r.wantCode(t, exitOK)
			var p index.ThreadPage
			if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
				t.Fatal(err)
			}
			for _, th := range p.Threads {
				out = append(out, th.ID)
			}
			if cursor = p.NextCursor; cursor == "" {
				return out
			}
			out = append(out, "cursor "+cursor)
		}
		return out
	}
	indexed, offline := pages("--data", dir), pages("--rollouts", datadir.RolloutsDir(dir))
	if strings.Join(indexed, "\n") != strings.Join(offline, "\n") || len(indexed) < 4 {
		t.Errorf("the index pages\n%s\nthe files page\n%s", strings.Join(indexed, "\n"), strings.Join(offline, "\n"))
	}

	// show --json is replay --json of the mirror file.
	want := runCLI(t, "replay", "--json", example("mid-turn-compaction"))
	r = runCLI(t, "show", "--data", dir, "--json", "thread-M")
	r.wantCode(t, exitOK)
	if r.stdout != want.stdout || r.stderr != "" {
		t.Errorf("show --json differs from replay --json (stderr %q)", r.stderr)
	}
	r = runCLI(t, "show", "--data", dir, "019c8a59")
	r.wantCode(t, exitOK)
	r.wantOut(t, "Replay of thread 019c8a59-e9dd-71f0-9ae3-4079fe9726a9, rollout 019c8a59-e9dd-71f0-9ae3-4079fe9726a9")
	runCLI(t, "show", "--data", dir, "no-such-thread").wantOneLineError(t, "no thread no-such-thread", "coordinator threads --data "+dir+" --search")
	runCLI(t, "show", "--data", dir, "019c8a").wantOneLineError(t, "ambiguous")

	// No bus to compare with: a check that could not run fails verify.
	r = runCLI(t, "verify", "--data", dir)
	r.wantCode(t, exitFailure)
	r.wantOut(t, "Index against mirror: ok: 11 rollouts indexed, 0 behind", "Mirror files: 11 files, 11 ok", "Mirror against JetStream: not checked")
	runCLI(t, "verify", "--data", dir, "x.jsonl").wantCode(t, exitUsage)

	// The mirror loses a suffix the index holds: verify fails and says so.
	p := filepath.Join(dir, datadir.Rollouts, "rollout-2.jsonl")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:bytes.LastIndexByte(data[:len(data)-1], '\n')+1], 0o644)
	r = runCLI(t, "verify", "--data", dir, "--json")
	r.wantCode(t, exitFailure)
	r.wantOut(t, `"kind": "index_ahead"`, `"ok": false`)
}

func TestShowCompressedAndStale(t *testing.T) {
	dir := dataDir(t, 0)
	runCLI(t, "reindex", "--data", dir).wantCode(t, exitOK)
	plain := filepath.Join(dir, datadir.Rollouts, "rollout-M.jsonl")
	zst := compressed(t, plain)
	os.Rename(zst, plain+rollout.ZstExt)
	os.Remove(plain)
	want := runCLI(t, "replay", "--json", example("mid-turn-compaction"))
	r := runCLI(t, "show", "--data", dir, "--json", "thread-M")
	r.wantCode(t, exitOK)
	if r.stdout != want.stdout || r.stderr != "" {
		t.Errorf("show of the compressed rollout differs from replay (stderr %q)", r.stderr)
	}

	// A record lands in the mirror; nothing indexed it yet.
	p := filepath.Join(dir, datadir.Rollouts, "rollout-A2.jsonl")
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	b := rollout.Builder{Next: 26}
	rec := b.UserMessage("one more")
	f.Write(append(rec.Append(nil), '\n'))
	f.Close()
	r = runCLI(t, "show", "--data", dir, "thread-A2")
	r.wantCode(t, exitOK)
	if !strings.HasPrefix(r.stderr, "coordinator: warning: the index lags the mirror") || !strings.Contains(r.stderr, "reindex") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestReadWhileServed: threads and show work while another holder has the
// data dir's LOCK and writes its index; reindex refuses to run then.
func TestReadWhileServed(t *testing.T) {
	dir := dataDir(t, 12)
	lock, err := serve.TakeLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	ix, err := index.Open(context.Background(), dir, index.Options{BatchRecords: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.CatchUp(context.Background(), nil); err != nil { // something to read from the start
		t.Fatal(err)
	}
	extra := datadir.RolloutsDir(dir)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for s := 100; s < 112; s++ {
			mem := rollout.MemOf("", gen.All(gen.Config{Seed: int64(s), Records: 400}))
			os.WriteFile(filepath.Join(extra, fmt.Sprintf("rollout-%d.jsonl", s)), mem.Bytes(), 0o644)
			if _, err := ix.CatchUpRollout(context.Background(), fmt.Sprintf("rollout-%d", s)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 15; i++ {
		runCLI(t, "threads", "--data", dir, "--search", "request").wantCode(t, exitOK)
		runCLI(t, "show", "--data", dir, "--json", "thread-7").wantCode(t, exitOK)
	}
	wg.Wait()
	r := runCLI(t, "threads", "--data", dir, "--limit", "100")
	r.wantOut(t, "thread-111", "32 threads; no more pages.")
	runCLI(t, "reindex", "--data", dir).wantOneLineError(t, "data dir in use", "stop the coordinator")
}
