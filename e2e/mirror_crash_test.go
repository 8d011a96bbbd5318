package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

var (
	crashRounds = flag.Int("crash.rounds", 0, "random SIGKILL rounds of TestMirrorCrash (0: 3); every named point gets a round too")
	crashSeed   = flag.Int64("crash.seed", 0, "seed of TestMirrorCrash (0: from the clock)")
	crashNamed  = flag.Int("crash.named", 1, "rounds of TestMirrorCrash at each named crash point")
)

// namedPoints are the crash points TestMirrorCrash arms, one round each
// (internal/faults lists them).
var namedPoints = []string{
	"mirror.after-ack", "mirror.mid-append", "mirror.before-watermark",
	"mirror.zst-before-rename", "mirror.zst-after-rename", "mirror.unzst-after-rename",
	"index.mid-tx",
}

// settleDeadline is how long the system may take, after the last restart,
// to hold every acknowledged record in the mirror and in the index.
const settleDeadline = 20 * time.Second

// TestMirrorCrash runs `coordinator serve` as a child process while writers
// in this process stream records through it, and kills it with SIGKILL:
// once at each named crash point and at random moments (seeded; the seed
// is printed). After each death it checks the files the child left: every
// mirror line is a line its writer appended, in ordinal order without
// duplicates (a torn last line aside), the index no further than the
// mirror, nothing valid quarantined, the referenced rollout never
// compressed. After the last restart, within settleDeadline, every
// acknowledged record is in JetStream, byte-equal in the mirror and in the
// index, and `coordinator verify --data` passes.
func TestMirrorCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the coordinator and kills it repeatedly")
	}
	seed := *crashSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -crash.seed %d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	rounds := *crashRounds
	if rounds <= 0 {
		rounds = 3
	}
	bin := coordinatorBin(t)
	dir := t.TempDir()
	// The OS picks the ports at the first start; restarts take the same
	// ones again, so the writers' connections find the bus where it was.
	args := []string{"serve", "--data", dir, "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--cold-after", "300ms"}

	type plan struct {
		point string // "" for a random kill
		hit   int
		after time.Duration
	}
	var plans []plan
	for range max(*crashNamed, 1) {
		for _, p := range namedPoints {
			hit := 1 + rng.Intn(3)
			if strings.Contains(p, "zst") {
				hit = 1
			}
			plans = append(plans, plan{point: p, hit: hit})
		}
	}
	for i := 0; i < rounds; i++ {
		plans = append(plans, plan{after: time.Duration(50+rng.Intn(1500)) * time.Millisecond})
	}
	rng.Shuffle(len(plans), func(i, j int) { plans[i], plans[j] = plans[j], plans[i] })

	var logs []*syncBuffer // every run's stderr, to count what the mirror did
	startChild := func(t testing.TB, bin string, env []string, args ...string) *child {
		c := startChild(t, bin, env, args...)
		logs = append(logs, c.stderr)
		return c
	}
	c := startChild(t, bin, nil, args...)
	natsAddr, httpAddr := boundAddrs(t, c, dir)
	args = []string{"serve", "--data", dir, "--nats-listen", natsAddr, "--listen", httpAddr, "--cold-after", "300ms"}
	waitHealthy(t, c, httpAddr, 60*time.Second)
	url := "nats://" + natsAddr
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}

	// base is referenced by fork's history_base: it must never be compressed.
	writers := []*simWriter{
		newSimWriter("base", rng.Int63(), true, nil),
		newSimWriter("fork", rng.Int63(), true, &rollout.HistoryPosition{RolloutID: "base", EndOrdinalExclusive: 1}),
	}
	for i := 0; i < 4; i++ {
		writers = append(writers, newSimWriter(fmt.Sprintf("w%d", i), rng.Int63(), i%2 == 0, nil))
	}
	byID := map[string]*simWriter{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(writers)+1)
	for _, w := range writers {
		byID[w.id] = w
		wg.Add(1)
		go func() { defer wg.Done(); errs <- w.run(ctx, bus, stop) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); publishJunk(ctx, nc, stop, rng.Int63()) }()

	kills := map[string]int{}
	for i, p := range plans {
		if p.point != "" {
			// Restart with the point armed, then wait for it to fire.
			c.kill()
			env := []string{fmt.Sprintf("%s=%s:%d", faults.EnvVar, p.point, p.hit)}
			c = startChild(t, bin, env, args...)
			reached := poll(20*time.Second, c.exited)
			if !reached {
				c.kill()
				t.Logf("round %d: %s not reached in 20s; killed", i, p.point)
				kills["(not reached) "+p.point]++
			} else if !c.killedBySignal() || !strings.Contains(c.stderr.String(), "faults: crash point "+p.point) {
				t.Fatalf("round %d: coordinator exited without reaching %s: %v\n%s", i, p.point, c.err, c.stderr)
			} else {
				kills[p.point]++
			}
		} else {
			time.Sleep(p.after) // the kill lands at a random moment of the work
			c.kill()
			kills["random"]++
		}
		if v := checkDisk(ctx, dir, byID); len(v) > 0 {
			t.Fatalf("round %d (%+v): after the kill:\n%s\ncoordinator stderr:\n%s", i, p, strings.Join(v, "\n"), tail(c.stderr.String(), 40))
		}
		if p.point == "" || i < len(plans)-1 {
			start := time.Now()
			c = startChild(t, bin, nil, args...)
			waitHealthy(t, c, httpAddr, 60*time.Second)
			t.Logf("round %d: %-28s restarted and ready in %s", i, orRandom(p.point, p.after), time.Since(start).Round(time.Millisecond))
		}
	}
	if c.exited() {
		c = startChild(t, bin, nil, args...)
		waitHealthy(t, c, httpAddr, 60*time.Second)
	}
	restarted := time.Now()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Within the deadline: the mirror and the index hold every acknowledged record.
	var last []string
	if !poll(settleDeadline, func() bool { last = checkSettled(ctx, dir, byID); return len(last) == 0 }) {
		t.Fatalf("not settled %s after the last restart:\n%s\ncoordinator stderr:\n%s", settleDeadline, strings.Join(last, "\n"), tail(c.stderr.String(), 40))
	}
	settled := time.Since(restarted)
	if v := checkBus(ctx, bus, byID); len(v) > 0 {
		t.Fatal(strings.Join(v, "\n"))
	}
	out, err := exec.Command(bin, "verify", "--data", dir).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("Mirror against JetStream: ok")) {
		t.Fatalf("coordinator verify --data: %v\n%s", err, out)
	}
	var total int64
	reopens := 0
	for _, w := range writers {
		_, a := w.snapshot()
		total += a
		reopens += w.reops
	}
	seen := map[string]int{}
	for i, l := range logs {
		s := l.String()
		if d := os.Getenv("CRASH_LOGS"); d != "" {
			_ = os.WriteFile(fmt.Sprintf("%s/run-%02d.log", d, i), []byte(s), 0o644)
		}
		for _, what := range []string{"torn tail repaired", "idle rollout compressed", "rollout re-materialized",
			"message quarantined", "rollout found both plain and compressed", "removing a temp file"} {
			seen[what] += strings.Count(s, "mirror: "+what)
		}
	}
	t.Logf("seed %d: %d kills %v; %d records acknowledged in %d rollouts (%d writer reopens); settled %s after the last restart",
		seed, len(plans), kills, total, len(writers), reopens, settled.Round(time.Millisecond))
	t.Logf("the mirror's logs over all runs: %v", seen)
}

func orRandom(point string, after time.Duration) string {
	if point != "" {
		return point
	}
	return fmt.Sprintf("random kill after %s", after)
}

// publishJunk publishes what no writer would, on rollout.junk-*, until stop.
func publishJunk(ctx context.Context, nc *nats.Conn, stop <-chan struct{}, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(100+rng.Intn(200)) * time.Millisecond):
		}
		m := nats.NewMsg(fmt.Sprintf("rollout.junk-%d", n))
		m.Data = []byte(fmt.Sprintf("junk %d \x00\xff", rng.Int()))
		_ = nc.PublishMsg(m) // no ack wanted: the coordinator may be down
		_ = ctx
	}
}

// mirrorLines reads a mirror file: its whole lines, and whether a torn
// last line follows them.
func mirrorLines(path string) ([][]byte, bool, error) {
	var data []byte
	var err error
	if strings.HasSuffix(path, rollout.ZstExt) {
		data, err = decompress(path)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, false, err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	torn := false
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	} else if n > 0 {
		lines, torn = lines[:n-1], true
	}
	return lines, torn, nil
}

// checkDisk checks a data dir the coordinator left when it died.
func checkDisk(ctx context.Context, dir string, writers map[string]*simWriter) []string {
	var v []string
	files, err := datadir.MirrorFiles(dir)
	if err != nil {
		return []string{err.Error()}
	}
	lastOrd := map[string]int64{}
	for _, f := range files {
		w := writers[f.RolloutID]
		if w == nil {
			v = append(v, fmt.Sprintf("mirror file %s: no writer wrote rollout %s (a refused message was mirrored)", f.Path, f.RolloutID))
			continue
		}
		if f.RolloutID == "base" && strings.HasSuffix(f.Path, rollout.ZstExt) {
			v = append(v, "rollout base, referenced by fork's history_base, was compressed")
		}
		lines, _, err := mirrorLines(f.Path)
		if err != nil {
			v = append(v, err.Error())
			continue
		}
		want, _ := w.snapshot()
		for i, l := range lines {
			ord := int64(i + 1)
			if !bytes.Equal(l, want[ord]) {
				v = append(v, fmt.Sprintf("rollout %s: mirror line %d is not the writer's ordinal %d:\n  got  %.200q\n  want %.200q", f.RolloutID, ord, ord, l, want[ord]))
				break
			}
		}
		lastOrd[f.RolloutID] = int64(len(lines))
	}
	r, err := index.OpenReader(ctx, datadir.IndexPath(dir))
	if err == nil {
		defer r.Close()
		ros, err := r.Rollouts(ctx)
		if err != nil {
			v = append(v, "index: "+err.Error())
		}
		for _, ro := range ros {
			if ro.WatermarkOrdinal > lastOrd[ro.ID] {
				v = append(v, fmt.Sprintf("rollout %s: the index holds ordinal %d, the mirror file only %d (the index leads)", ro.ID, ro.WatermarkOrdinal, lastOrd[ro.ID]))
			}
		}
	} else if !errors.Is(err, index.ErrNoIndex) {
		v = append(v, "index: "+err.Error())
	}
	qs, err := mirror.ReadQuarantine(dir)
	if err != nil {
		v = append(v, "quarantine: "+err.Error())
	}
	for _, q := range qs {
		if !strings.HasPrefix(q.Subject, "rollout.junk-") {
			v = append(v, fmt.Sprintf("a writer's message was quarantined: seq %d %s: %s: %s", q.Seq, q.Subject, q.Kind, q.Reason))
		}
	}
	for _, w := range writers {
		w.mu.Lock()
		v = append(v, w.lost...)
		w.mu.Unlock()
	}
	return v
}

// checkSettled checks that the mirror and the index hold exactly what each
// writer had acknowledged once all of them finished.
func checkSettled(ctx context.Context, dir string, writers map[string]*simWriter) []string {
	v := checkDisk(ctx, dir, writers)
	r, err := index.OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		return append(v, "index: "+err.Error())
	}
	defer r.Close()
	ids := make([]string, 0, len(writers))
	for id := range writers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		_, acked := writers[id].snapshot()
		p := datadir.MirrorPath(dir, id)
		if p == "" {
			v = append(v, fmt.Sprintf("rollout %s: no mirror file", id))
			continue
		}
		lines, torn, err := mirrorLines(p)
		if err != nil || torn || int64(len(lines)) != acked {
			v = append(v, fmt.Sprintf("rollout %s: the mirror holds %d whole lines (torn tail %v, %v), %d acknowledged", id, len(lines), torn, err, acked))
		}
		ro, found, err := r.Rollout(ctx, id)
		if err != nil || !found || ro.WatermarkOrdinal != acked {
			v = append(v, fmt.Sprintf("rollout %s: the index holds %d (found %v, %v), %d acknowledged", id, ro.WatermarkOrdinal, found, err, acked))
		}
	}
	return v
}

// checkBus checks that JetStream holds every acknowledged record, byte for
// byte, and nothing more, for every writer's rollout.
func checkBus(ctx context.Context, bus *stream.Bus, writers map[string]*simWriter) []string {
	var v []string
	for id, w := range writers {
		lines, acked := w.snapshot()
		es, err := bus.ReadAll(ctx, id, 1)
		if err != nil {
			v = append(v, fmt.Sprintf("rollout %s: read the bus: %v", id, err))
			continue
		}
		if int64(len(es)) != acked {
			v = append(v, fmt.Sprintf("rollout %s: the bus holds %d records, %d acknowledged", id, len(es), acked))
		}
		for i, e := range es {
			if !bytes.Equal(append(bytes.Clone(e.Record.Raw), '\n'), lines[int64(i+1)]) {
				v = append(v, fmt.Sprintf("rollout %s: ordinal %d on the bus is not the writer's", id, i+1))
				break
			}
		}
	}
	return v
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
