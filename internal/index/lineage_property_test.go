package index

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/tree"
)

// answer is what `tree` and `unconfirmed` print, as comparable JSON.
type answer struct {
	Tree, Pending, Results string
	Confirmed              int
}

func answerOf(t testing.TB, tr *tree.Tree, confirmed int) answer {
	t.Helper()
	var pending []dedupe.Delivery
	for _, d := range tr.Deliveries {
		if d.State != dedupe.Confirmed {
			pending = append(pending, d)
		}
	}
	js := func(v any) string {
		b, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return answer{Tree: js(tr), Pending: js(pending), Results: js(tr.ChildResults), Confirmed: confirmed}
}

// scanAnswer is the full scan's: every mirror file read and replayed.
func scanAnswer(t testing.TB, dir string) answer {
	t.Helper()
	c, err := tree.LoadDir(datadir.RolloutsDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	tr := tree.Build(c, tree.Options{})
	confirmed := 0
	for _, d := range tr.Deliveries {
		if d.State == dedupe.Confirmed {
			confirmed++
		}
	}
	return answerOf(t, tr, confirmed)
}

// indexAnswer is the index's: its projections, assembled.
func indexAnswer(t testing.TB, dir string) answer {
	t.Helper()
	ctx := context.Background()
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	in, err := r.Lineage(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	return answerOf(t, tree.Assemble(in, tree.Options{}), count(t, r.db, `SELECT count(*) FROM deliveries WHERE state = 'confirmed'`))
}

func sameAnswer(t *testing.T, what string, got, want answer) bool {
	t.Helper()
	ok := true
	for _, c := range []struct{ name, got, want string }{{"tree", got.Tree, want.Tree}, {"deliveries", got.Pending, want.Pending},
		{"child results", got.Results, want.Results}} {
		if c.got != c.want {
			t.Errorf("%s: the index's %s differ from the full scan's:\n%s", what, c.name, firstDiff(c.got, c.want))
			ok = false
		}
	}
	if got.Confirmed != want.Confirmed {
		t.Errorf("%s: the index counts %d confirmed deliveries, the full scan %d", what, got.Confirmed, want.Confirmed)
		ok = false
	}
	return ok
}

// firstDiff shows the lines around the first difference of two texts.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-300)
	return "index:     ..." + a[lo:min(len(a), i+200)] + "\nfull scan: ..." + b[lo:min(len(b), i+200)]
}

// TestLineageIndexEqualsFullScan is the property the lineage and ledger
// projections promise: over generated agent trees (rollbacks, reverts,
// forks by copy and by reference, re-sends, duplicate receipts, ...), the
// index answers tree and unconfirmed exactly as the full scan of the same
// mirror files does, rebuilt at once and caught up while the files grow
// (rollouts interleaved, cut anywhere), and the hard cases all occur.
func TestLineageIndexEqualsFullScan(t *testing.T) {
	seeds := short(150, 30)
	base := rand.Uint64()
	t.Logf("seeds %d .. %d", base, base+uint64(seeds)-1)
	cov := map[string]int{}
	states := map[string]int{}
	for i := 0; i < seeds; i++ {
		seed := base + uint64(i)
		g := newAgentGen(seed)
		g.tree(1 + int(seed%3))
		for k, v := range g.cov {
			cov[k] += v
		}
		dir := t.TempDir()
		g.write(t, dir)
		rebuild(t, dir)
		want := scanAnswer(t, dir)
		if !sameAnswer(t, "rebuilt", indexAnswer(t, dir), want) {
			t.Fatalf("seed %d (the data dir is %s)", seed, dir)
		}
		var tr struct {
			Roots []json.RawMessage `json:"roots"`
		}
		json.Unmarshal([]byte(want.Tree), &tr)
		var pend []dedupe.Delivery
		json.Unmarshal([]byte(want.Pending), &pend)
		for _, d := range pend {
			states[d.State]++
		}
		if want.Confirmed > 0 {
			states["confirmed"]++
		}
		samePages(t, rand.New(rand.NewPCG(seed, 3)), dir)
		sameSubtrees(t, rand.New(rand.NewPCG(seed, 4)), dir)
		if i%5 == 0 {
			grow := t.TempDir()
			growIndex(t, rand.New(rand.NewPCG(seed, 2)), dir, grow)
			if !sameAnswer(t, "caught up", indexAnswer(t, grow), scanAnswer(t, grow)) {
				t.Fatalf("seed %d: caught up while growing (the data dir is %s)", seed, grow)
			}
		}
	}
	t.Logf("coverage: %v", cov)
	t.Logf("delivery states: %v", states)
	for _, k := range []string{"rollback", "rollback in a view", "revert", "fork by copy", "fork by reference", "fork mid-turn",
		"task re-sent", "result re-sent", "task received twice", "result received twice", "one key, two msg ids", "task never received",
		"result never received", "no result", "orphan receipt", "note", "never wrote a line", "dangling call", "compaction", "open turn"} {
		if cov[k] == 0 {
			t.Errorf("no generated tree had a %s", k)
		}
	}
	for _, s := range []string{dedupe.Confirmed, dedupe.Unconfirmed, dedupe.PossiblyDuplicated, dedupe.OrphanReceipt, dedupe.RolledBackReceipt} {
		if states[s] == 0 {
			t.Errorf("no generated tree had a delivery %s", s)
		}
	}
}

// growIndex copies the mirror files of src into data dir dst a random piece
// at a time, catching the index up after each piece.
func growIndex(t testing.TB, rng *rand.Rand, src, dst string) {
	t.Helper()
	ctx := context.Background()
	files, err := datadir.MirrorFiles(src)
	if err != nil {
		t.Fatal(err)
	}
	type growing struct {
		id   string
		data []byte
		at   int
	}
	var gs []*growing
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, &growing{id: f.RolloutID, data: data})
	}
	ix := openDir(t, dst)
	ix.batch = 1 + rng.IntN(8)
	for len(gs) > 0 {
		i := rng.IntN(len(gs))
		g := gs[i]
		g.at = min(g.at+1+rng.IntN(len(g.data)/3+1), len(g.data))
		writeMirrorFile(t, dst, g.id, g.data[:g.at])
		if _, err := ix.CatchUpRollout(ctx, g.id); err != nil {
			t.Fatalf("catch up %s: %v", g.id, err)
		}
		if g.at == len(g.data) {
			gs = append(gs[:i], gs[i+1:]...)
		}
	}
	catchUp(t, ix)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLineagePropertyCatchesMutant proves the property test can fail: an
// index whose receipts ignore the view's prefix (a revert forgets the
// receipts it kept) is caught on generated trees.
func TestLineagePropertyCatchesMutant(t *testing.T) {
	base := rand.Uint64()
	for i := 0; i < 200; i++ {
		seed := base + uint64(i)
		g := newAgentGen(seed)
		g.tree(1 + int(seed%3))
		dir := t.TempDir()
		g.write(t, dir)
		if _, err := Rebuild(context.Background(), dir, Options{mutant: mutant{receiptsIgnoreView: true}}, nil); err != nil {
			t.Fatal(err)
		}
		if got, want := indexAnswer(t, dir), scanAnswer(t, dir); got != want {
			t.Logf("mutant caught at seed %d after %d trees", seed, i+1)
			return
		}
	}
	t.Fatalf("the mutant survived 200 generated trees from seed %d: the property test cannot see receipts kept by a revert", base)
}

// samePages pages unconfirmed through the index (Unconfirmed) and over the
// full scan's lists (PageUnconfirmed), with random filters and page sizes,
// and requires the same pages.
func samePages(t *testing.T, rng *rand.Rand, dir string) {
	t.Helper()
	ctx := context.Background()
	c, err := tree.LoadDir(datadir.RolloutsDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	tr := tree.Build(c, tree.Options{})
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ids []string
	for _, d := range tr.Deliveries {
		ids = append(ids, d.ToThread, d.FromThread)
	}
	for k := 0; k < 4; k++ {
		uq := UnconfirmedQuery{Limit: rng.IntN(5)}
		if k > 0 && rng.IntN(2) == 0 {
			uq.State = States[rng.IntN(len(States))]
		}
		if k > 1 && len(ids) > 0 {
			uq.Thread = ids[rng.IntN(len(ids))]
		}
		for pages := 0; ; pages++ {
			got, err := r.Unconfirmed(ctx, uq)
			if err != nil {
				t.Fatal(err)
			}
			want, err := PageUnconfirmed(tr.ChildResults, tr.Deliveries, uq)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Fatalf("unconfirmed %+v page %d: the index gives\n%s\nthe full scan\n%s", uq, pages, g, w)
			}
			if got.NextCursor == "" {
				break
			}
			if pages > 1000 {
				t.Fatalf("unconfirmed %+v: no last page", uq)
			}
			uq.After = got.NextCursor
		}
	}
}

// sameSubtrees asks the index for the subtrees of random nodes (threads and
// children that never wrote a line, by id or by a prefix) and requires what
// the full scan's tree gives for them (Find): the same nodes, counts and
// statuses, with the whole tree's orphans and problems.
func sameSubtrees(t *testing.T, rng *rand.Rand, dir string) {
	t.Helper()
	ctx := context.Background()
	c, err := tree.LoadDir(datadir.RolloutsDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	active := func(id string) bool { return len(id)%3 == 0 }
	whole := tree.Build(c, tree.Options{Active: active})
	var ids []string
	var walk func(n *tree.Node)
	walk = func(n *tree.Node) {
		ids = append(ids, n.ThreadID)
		for _, ch := range n.Children {
			walk(ch)
		}
	}
	for _, n := range whole.Roots {
		walk(n)
	}
	r, err := OpenReader(ctx, datadir.IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for k := 0; k < 6 && len(ids) > 0; k++ {
		id := ids[rng.IntN(len(ids))]
		if k%2 == 1 {
			id = id[:1+rng.IntN(len(id))] // a prefix: unique or not
		}
		want, werr := whole.Find(id)
		got, gerr := r.Subtree(ctx, dir, id, tree.Options{Active: active})
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("subtree %q: the index says %v, the full scan %v", id, gerr, werr)
		}
		if werr != nil {
			continue
		}
		if g, w := js([]any{got.Roots, got.Orphans, got.Problems}), js([]any{[]*tree.Node{want}, whole.Orphans, whole.Problems}); g != w {
			t.Fatalf("subtree %q: the index's differs from the full scan's:\n%s", id, firstDiff(g, w))
		}
	}
}
