package treegen

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Config shapes a generated tree.
type Config struct {
	Seed   int64
	Fanout int // children of every thread above the leaves
	Depth  int // levels below the root (0: the root alone)
	Turns  int // turns of every thread (at least 1)
	// Unreceived is the fraction of results the parent never logs
	// receiving (0: every delivery confirmed).
	Unreceived float64
	// Start is the root's first timestamp (zero: 2026-12-01T00:00:00Z).
	Start time.Time
}

// Stats say what Write wrote.
type Stats struct {
	Threads    int
	Records    int64
	Bytes      int64
	Edges      int // parent-child edges (each a task and a result)
	Unreceived int // results the parent never received
	Root       string
}

func (c Config) check() error {
	switch {
	case c.Fanout < 0 || c.Depth < 0:
		return fmt.Errorf("treegen: fanout %d, depth %d: want >= 0", c.Fanout, c.Depth)
	case c.Turns < 1:
		return fmt.Errorf("treegen: turns %d: want >= 1", c.Turns)
	case c.Unreceived < 0 || c.Unreceived > 1:
		return fmt.Errorf("treegen: unreceived %g: want a fraction in [0, 1]", c.Unreceived)
	}
	return nil
}

// Threads is how many threads the tree holds: 1 + Fanout + ... + Fanout^Depth.
func (c Config) Threads() int { return Subtree(c.Fanout, c.Depth) }

// Subtree is the size of a full tree of that fanout and depth.
func Subtree(fanout, depth int) int {
	n, level := 1, 1
	for range depth {
		level *= fanout
		n += level
	}
	return n
}

// ID is the thread id at a path of child indexes from the root (none: the
// root). It looks like a UUID and depends only on the seed and the path.
func ID(c Config, path ...int) string {
	h := hashPath(c.Seed, path)
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], h)
	binary.BigEndian.PutUint64(b[8:], mix(h^0x9e3779b97f4a7c15))
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func hashPath(seed int64, path []int) uint64 {
	f := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seed))
	f.Write(b[:])
	for _, i := range path {
		binary.BigEndian.PutUint64(b[:], uint64(i))
		f.Write(b[:])
	}
	return mix(f.Sum64())
}

// mix is splitmix64's finalizer: every input bit moves every output bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Write writes the tree's rollout files under dir (created if missing), on
// every core. It refuses a dir that already holds a file of the tree's root,
// so two trees are never mixed by accident.
func Write(dir string, c Config) (Stats, error) {
	if err := c.check(); err != nil {
		return Stats{}, err
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	}
	w := &writer{cfg: c, dir: dir, sem: make(chan struct{}, runtime.GOMAXPROCS(0))}
	root := ID(c)
	if _, err := os.Stat(w.path(root, c.Start)); err == nil {
		return Stats{}, fmt.Errorf("treegen: %s already holds this tree (%s)", dir, w.path(root, c.Start))
	}
	w.thread(nil, "", "", rollout.InterAgentSent{}, c.Start)
	w.wg.Wait()
	if err := w.err(); err != nil {
		return Stats{}, err
	}
	return Stats{Threads: int(w.threads.Load()), Records: w.records.Load(), Bytes: w.bytes.Load(),
		Edges: int(w.threads.Load()) - 1, Unreceived: int(w.unreceived.Load()), Root: root}, nil
}

type writer struct {
	cfg Config
	dir string
	sem chan struct{} // a token per extra goroutine
	wg  sync.WaitGroup

	threads, unreceived atomic.Int64
	records, bytes      atomic.Int64
	mu                  sync.Mutex
	first               error
}

func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first == nil {
		w.first = err
	}
}

func (w *writer) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

func (w *writer) path(id string, start time.Time) string {
	return filepath.Join(w.dir, start.Format("2006"), start.Format("01"), start.Format("02"),
		"rollout-"+start.Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
}

// result is what a child hands its parent: the result it sent.
type result struct {
	from     string
	sent     rollout.InterAgentSent
	at       time.Time
	received bool // the parent logs receiving it
}

// thread writes the thread at path (its parent's id, its task, when it
// starts) and then its subtree; it returns the result it sends up.
func (w *writer) thread(path []int, parent, role string, task rollout.InterAgentSent, start time.Time) result {
	c := w.cfg
	id := ID(c, path...)
	g := &thread{rng: rand.New(rand.NewPCG(uint64(c.Seed), hashPath(c.Seed, path))), clock: start, id: id}
	g.b.Now = g.tick
	meta := rollout.SessionMeta{ID: id, ParentThreadID: parent, Source: rollout.Source{Kind: "cli"}, AgentRole: role,
		Cwd: "/src/proj-" + strconv.Itoa(int(hashPath(c.Seed, path[:min(len(path), 1)])%100)), SchemaVersion: rollout.Version}
	if parent != "" {
		meta.Source = rollout.Source{Kind: "sim"}
	}
	g.emit(g.b.Meta(meta))
	children := 0
	if len(path) < c.Depth {
		children = c.Fanout
	}
	spawnTurn := max(c.Turns-1, 1) // the turn that spawns; the last one gathers
	var tasks []rollout.InterAgentSent
	var spawnedAt []time.Time
	var results []result
	receipts := func() {
		for _, r := range results {
			if r.received {
				g.emit(g.b.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: r.sent.MsgID,
					IdempotencyKey: r.sent.IdempotencyKey, FromThread: r.from, Kind: rollout.MsgResult, InReplyTo: r.sent.InReplyTo}))
			}
		}
	}
	res := result{from: id}
	for turn := 1; turn <= c.Turns; turn++ {
		gather := turn == c.Turns && turn != spawnTurn && children > 0
		if gather { // the last turn starts once every result is in
			results = w.children(g, path, id, tasks, spawnedAt)
		}
		turnID := "turn-" + strconv.Itoa(turn)
		g.emit(g.b.TaskStarted(turnID))
		if turn == 1 && task.MsgID != "" {
			g.emit(g.b.Event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: task.MsgID,
				IdempotencyKey: task.IdempotencyKey, FromThread: parent, Kind: rollout.MsgTask}))
		}
		if gather {
			receipts()
		}
		g.turn(turnID, turn)
		if turn == spawnTurn && children > 0 {
			for i := range children {
				child := ID(c, append(path[:len(path):len(path)], i)...)
				g.emit(g.b.Event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: child, AgentRole: roles[i%len(roles)]}))
				t := rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: g.msgID(), IdempotencyKey: "task-" + child,
					ToThread: child, Kind: rollout.MsgTask, Body: rollout.MustJSON(map[string]string{"text": "step " + strconv.Itoa(i) + " of " + id})}
				g.emit(g.b.Event(t))
				tasks, spawnedAt = append(tasks, t), append(spawnedAt, g.clock)
			}
			if turn == c.Turns { // a single turn spawns and gathers
				results = w.children(g, path, id, tasks, spawnedAt)
				receipts()
			}
		}
		if turn == c.Turns && task.MsgID != "" {
			res.sent = rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: g.msgID(), IdempotencyKey: "result-" + id,
				ToThread: parent, Kind: rollout.MsgResult, InReplyTo: task.MsgID, Body: rollout.MustJSON(map[string]any{"thread": id, "turns": c.Turns})}
			g.emit(g.b.Event(res.sent))
			res.at = g.clock
			res.received = g.rng.Float64() >= c.Unreceived
		}
		g.emit(g.b.TaskComplete(turnID))
	}
	if err := w.flush(g, id, start); err != nil {
		w.fail(err)
	}
	return res
}

// children writes the subtrees of a thread's children (in parallel while
// cores are free) and returns their results in child order; the parent's
// clock moves past the last of them.
func (w *writer) children(g *thread, path []int, id string, tasks []rollout.InterAgentSent, at []time.Time) []result {
	out := make([]result, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		cp := append(path[:len(path):len(path)], i)
		run := func() {
			out[i] = w.thread(cp, id, roles[i%len(roles)], t, at[i].Add(time.Duration(50+i)*time.Millisecond))
		}
		select {
		case w.sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-w.sem }()
				run()
			}()
		default:
			run()
		}
	}
	wg.Wait()
	for _, r := range out {
		if r.at.After(g.clock) {
			g.clock = r.at
		}
		if !r.received {
			w.unreceived.Add(1)
		}
	}
	return out
}

var roles = []string{"explorer", "builder", "tester", "reviewer", "writer"}

// thread is one thread's records being made.
type thread struct {
	id    string
	rng   *rand.Rand
	clock time.Time
	b     rollout.Builder
	buf   bytes.Buffer
	n     int64
	msgs  int
}

func (g *thread) tick() time.Time {
	g.clock = g.clock.Add(time.Duration(100+g.rng.IntN(2900)) * time.Millisecond)
	return g.clock
}

func (g *thread) emit(r rollout.Record) {
	g.buf.Write(r.Append(nil))
	g.buf.WriteByte('\n')
	g.n++
}

// msgID is a ULID stamped with the thread's clock; its entropy is the
// thread's random source.
func (g *thread) msgID() string {
	var e [10]byte
	binary.BigEndian.PutUint64(e[:8], g.rng.Uint64())
	binary.BigEndian.PutUint16(e[8:], uint16(g.msgs))
	g.msgs++
	return ulid.MustNew(ulid.Timestamp(g.clock), bytes.NewReader(e[:])).String()
}

var (
	asks  = []string{"look at the failing test in", "add a flag for", "make the retry bounded in", "document", "refactor", "measure"}
	areas = []string{"the importer", "the mirror", "the index", "the lease code", "the writer", "the replay"}
	tools = []string{"shell", "read_file", "apply_patch", "search"}
)

// turn writes the body of one turn.
func (g *thread) turn(turnID string, n int) {
	ask := asks[g.rng.IntN(len(asks))] + " " + areas[g.rng.IntN(len(areas))] + " (turn " + strconv.Itoa(n) + ")"
	g.emit(g.b.TurnContext(rollout.TurnContext{TurnID: turnID, Model: "model-large", ApprovalPolicy: "on-request", Cwd: "/src"}))
	g.emit(g.b.UserMessage(ask))
	g.emit(g.b.Message("user", ask))
	call := "call-" + strconv.Itoa(n)
	tool := tools[g.rng.IntN(len(tools))]
	g.emit(g.b.Call(call, tool, `{"cmd":"`+tool+` `+strconv.Itoa(g.rng.IntN(1000))+`"}`, ""))
	g.emit(g.b.Output(call, "exit 0; "+strconv.Itoa(g.rng.IntN(500))+" lines of output elided"))
	g.emit(g.b.Message("assistant", "Done: "+ask+". Nothing else changed."))
	g.emit(g.b.TokenCount(int64(1000*n+g.rng.IntN(1000)), int64(200+g.rng.IntN(800))))
}

// flush writes the thread's file whole (temp file, then rename).
func (w *writer) flush(g *thread, id string, start time.Time) error {
	p := w.path(id, start)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("treegen: %w", err)
	}
	tmp := p + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("treegen: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	_, err = bw.Write(g.buf.Bytes())
	err = errors.Join(err, bw.Flush(), f.Close())
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("treegen: %s: %w", p, err)
	}
	w.threads.Add(1)
	w.records.Add(g.n)
	w.bytes.Add(int64(g.buf.Len()))
	return nil
}
