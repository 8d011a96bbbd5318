package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// single is one embedded server with the bus set up, shared by a test.
func single(t *testing.T) (*testServer, *Bus) {
	t.Helper()
	ts := startTestServer(t, FsyncInterval)
	return ts, openBus(t, connect(t, ts.url()), SetupConfig{})
}

// expectLine is the line the writer must store for r at ordinal ord.
func expectLine(r rollout.Record, ord int64) []byte {
	r.Raw = nil
	r.Ordinal = ord
	r.CRC = rollout.Checksum(r.Payload)
	return r.Encode()
}

func TestWriterOrderAndBytes(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 30*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{})
	recs := []rollout.Record{meta("th1", "ro1"), taskStarted("t1"), userMsg("hello <&> \"world\"")}
	for i := 0; i < 50; i++ {
		recs = append(recs, item(id("item", i), 300))
	}
	for i, r := range recs {
		ord, err := w.Append(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if ord != int64(i+1) {
			t.Fatalf("record %d got ordinal %d", i, ord)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	es := readAll(t, bus, "ro1")
	checkContiguous(t, es, len(recs))
	for i, e := range es {
		if got, want := append(bytes.Clone(e.Record.Raw), '\n'), expectLine(recs[i], int64(i+1)); !bytes.Equal(got, want) {
			t.Fatalf("ordinal %d stored\n%s\nwant\n%s", i+1, got, want)
		}
		if e.Epoch != l.Epoch() {
			t.Fatalf("ordinal %d has epoch %d, want %d", i+1, e.Epoch, l.Epoch())
		}
	}
	// A reader from the middle starts at that ordinal, whatever the packing.
	for _, from := range []int64{2, 17, 53} {
		es, err := bus.ReadAll(ctx, "ro1", from)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != len(recs)-int(from)+1 || es[0].Ordinal != from {
			t.Fatalf("from %d: got %d records starting at %d", from, len(es), es[0].Ordinal)
		}
	}
	if es, err := bus.ReadAll(ctx, "ro1", 54); err != nil || len(es) != 0 {
		t.Fatalf("past the end: %d records, %v", len(es), err)
	}
	// A second writer (same lease, e.g. after a restart) continues the tail.
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w2 := openWriter(t, bus, l, "ro1", WriterOptions{})
	if w2.Next() != 54 || !w2.Materialized() {
		t.Fatalf("reopened writer: next %d materialized %v", w2.Next(), w2.Materialized())
	}
	if _, err := w2.Append(ctx, item("more", 100)); err != nil {
		t.Fatal(err)
	}
	if err := w2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, readAll(t, bus, "ro1"), 54)
}

func TestWriterGroupCommit(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 60*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{})
	if _, err := w.Append(ctx, meta("th1", "ro1")); err != nil {
		t.Fatal(err)
	}
	const appenders, each = 8, 200
	var wg sync.WaitGroup
	ords := make([][]int64, appenders)
	errs := make(chan error, appenders)
	for g := 0; g < appenders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				ord, err := w.Append(ctx, item(fmt.Sprintf("g%d-%d", g, i), 300))
				if err != nil {
					errs <- err
					return
				}
				ords[g] = append(ords[g], ord)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n := 1 + appenders*each
	es := readAll(t, bus, "ro1")
	checkContiguous(t, es, n)
	st := w.Stats()
	seqs := map[uint64]bool{}
	for _, e := range es {
		seqs[e.Seq] = true
	}
	t.Logf("%d records in %d publishes (%d attempts)", st.Records, st.Publishes, st.Attempts)
	if st.Records != int64(n) || st.Publishes >= int64(n) || int64(len(seqs)) != st.Publishes {
		t.Fatalf("stats %+v, %d messages on the bus: want %d records in fewer publishes, one message each", st, len(seqs), n)
	}
	// Each appender's records are stored in its own order, with its text.
	for g := range ords {
		for i, ord := range ords[g] {
			if i > 0 && ord <= ords[g][i-1] {
				t.Fatalf("appender %d: ordinal %d after %d", g, ord, ords[g][i-1])
			}
			if want := fmt.Sprintf("g%d-%d", g, i); !bytes.Contains(es[ord-1].Record.Payload, []byte(want)) {
				t.Fatalf("ordinal %d does not hold %s", ord, want)
			}
		}
	}
}

func TestWriterEndTurnBarriers(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 30*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{})
	for _, r := range []rollout.Record{meta("th1", "ro1"), taskStarted("t1"), userMsg("go")} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		if _, err := w.Append(ctx, item(id("body", i), 200)); err != nil {
			t.Fatal(err)
		}
	}
	body := w.Next() - 1
	announced := false
	ord, err := w.EndTurn(ctx, taskComplete("t1"), func(ord int64) {
		announced = true
		// First barrier: the whole body is on the bus before the announcement.
		tail, err := bus.Tail(ctx, "ro1")
		if err != nil || tail.Ordinal < body {
			t.Errorf("at the announcement the bus holds up to %d (%v), the body ends at %d", tail.Ordinal, err, body)
		}
		if ord != body+1 {
			t.Errorf("terminal ordinal %d, want %d", ord, body+1)
		}
	})
	if err != nil || !announced {
		t.Fatalf("EndTurn: %v, announced %v", err, announced)
	}
	// Second barrier: the terminal record itself is on the bus on return.
	tail, err := bus.Tail(ctx, "ro1")
	if err != nil || tail.Ordinal != ord {
		t.Fatalf("after EndTurn the tail is %d (%v), want %d", tail.Ordinal, err, ord)
	}
	es := readAll(t, bus, "ro1")
	if k := es[len(es)-1].Record.EventKind(); k != rollout.EventTaskComplete {
		t.Fatalf("last record is %q", k)
	}
}

func TestWriterBackPressure(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 30*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{QueueRecords: 4})
	// A deferred rollout publishes nothing, so its queue fills for sure.
	for _, r := range []rollout.Record{meta("th1", "ro1"), turnContext("t1"), turnContext("t1"), turnContext("t1")} {
		if _, err := w.TryAppend(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.TryAppend(turnContext("t1")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("TryAppend on a full queue: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := w.Append(short, turnContext("t1"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append on a full queue: %v, want it to wait until the context ends", err)
	}
	if w.Next() != 5 {
		t.Fatalf("refused appends consumed ordinals: next %d", w.Next())
	}
	// A meaningful record materializes the rollout, the queue drains, and
	// the waiting Append gets its room.
	done := make(chan error, 1)
	go func() {
		_, err := w.Append(ctx, userMsg("hi"))
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ { // more than the queue holds: Append waits, never fails
		if _, err := w.Append(ctx, item(id("i", i), 300)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, readAll(t, bus, "ro1"), 45)
}

func TestWriterDeferredMaterialization(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 30*time.Second)
	l := take(t, bus, "th1", "test", false)

	// Closed before anything meaningful: nothing on the bus.
	w := openWriter(t, bus, l, "empty", WriterOptions{})
	for _, r := range []rollout.Record{meta("th1", "empty"), turnContext("t1")} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil || w.Materialized() {
		t.Fatalf("flush of a deferred rollout: %v, materialized %v", err, w.Materialized())
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if tail, err := bus.Tail(ctx, "empty"); err != nil || tail.Seq != 0 {
		t.Fatalf("a rollout closed before meaningful input is on the bus: %+v %v", tail, err)
	}

	// Each meaningful record materializes; so does Materialize.
	meaningful := map[string]rollout.Record{
		"user":     userMsg("hi"),
		"task":     taskStarted("t1"),
		"item":     item("x", 100),
		"received": event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: "m1", IdempotencyKey: "k", FromThread: "p1", Kind: rollout.MsgTask}),
		"explicit": {},
	}
	for name, r := range meaningful {
		rid := "ro-" + name
		w := openWriter(t, bus, l, rid, WriterOptions{})
		if _, err := w.Append(ctx, meta("th1", rid)); err != nil {
			t.Fatal(err)
		}
		if name == "explicit" {
			w.Materialize()
		} else if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		want := 2
		if name == "explicit" {
			want = 1
		}
		checkContiguous(t, readAll(t, bus, rid), want)
	}
}

func TestWriterRefusesWithNothingWritten(t *testing.T) {
	ts, _ := single(t)
	nc := connect(t, ts.url())
	bus, err := Open(ctxT(t, 10*time.Second), nc, Options{RecordLimit: 4096, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{})
	w.Materialize()
	badCRC := item("x", 100)
	badCRC.CRC = "00000000"
	wrongOrd := item("x", 100)
	wrongOrd.Ordinal = 7
	newline := rollout.New(time.Now(), 0, rollout.TypeResponseItem, []byte("{\"type\":\"message\",\n\"role\":\"user\"}"))
	cases := []struct {
		name string
		rec  rollout.Record
		want []error
	}{
		{"too large", item("big", 5000), []error{ErrTooLarge}},
		{"meta bad id", meta("a.b", "ro1"), []error{ErrInvalidRecord, rollout.ErrInvalidID}},
		{"meta other thread", meta("th2", "ro1"), []error{ErrInvalidRecord}},
		{"meta other rollout", meta("th1", "ro2"), []error{ErrInvalidRecord}},
		{"meta bad parent", rollout.New(time.Now(), 0, rollout.TypeSessionMeta, []byte(`{"id":"th1","rollout_id":"ro1","parent_thread_id":"p>","source":"sim","cwd":"/"}`)), []error{rollout.ErrInvalidID}},
		{"sent bad to", event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, MsgID: "m1", ToThread: "x y", Kind: rollout.MsgTask}), []error{rollout.ErrInvalidID}},
		{"sent no msg id", event(rollout.InterAgentSent{Type: rollout.EventInterAgentSent, ToThread: "c1", Kind: rollout.MsgTask}), []error{rollout.ErrInvalidID}},
		{"received bad from", event(rollout.InterAgentReceived{Type: rollout.EventInterAgentReceived, MsgID: "m1", FromThread: "*", Kind: rollout.MsgTask}), []error{rollout.ErrInvalidID}},
		{"spawned bad child", event(rollout.ThreadSpawned{Type: rollout.EventThreadSpawned, ChildThreadID: "a/b"}), []error{rollout.ErrInvalidID}},
		{"sealed bad successor", event(rollout.RolloutSealed{Type: rollout.EventRolloutSealed, SuccessorRolloutID: ""}), []error{rollout.ErrInvalidID}},
		{"bad crc", badCRC, []error{ErrInvalidRecord}},
		{"wrong ordinal", wrongOrd, []error{ErrWrongOrdinal}},
		{"newline", newline, []error{ErrInvalidRecord}},
		{"bad json", rollout.New(time.Now(), 0, rollout.TypeResponseItem, []byte(`{"type":`)), []error{ErrInvalidRecord}},
	}
	for _, c := range cases {
		ord, err := w.Append(ctx, c.rec)
		for _, want := range c.want {
			if !errors.Is(err, want) {
				t.Errorf("%s: got ordinal %d, error %v; want %v", c.name, ord, err, want)
			}
		}
		t.Logf("%s: %v", c.name, err)
	}
	if w.Next() != 1 {
		t.Fatalf("refused records consumed ordinals: next %d", w.Next())
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if tail, err := bus.Tail(ctx, "ro1"); err != nil || tail.Seq != 0 {
		t.Fatalf("refused records reached the bus: %+v %v", tail, err)
	}
	// The writer still works, and the limit is exact.
	ok := item("fits", 3000)
	if _, err := w.Append(ctx, meta("th1", "ro1")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, readAll(t, bus, "ro1"), 2)

	// AppendAll is one unit: one refused record and none is enqueued.
	for _, bad := range []rollout.Record{item("big", 5000), wrongOrd, badCRC} {
		if _, err := w.AppendAll(ctx, item("a", 10), item("b", 10), bad); err == nil {
			t.Fatalf("AppendAll with a bad record succeeded")
		}
		if w.Next() != 3 {
			t.Fatalf("a refused AppendAll consumed ordinals: next %d, want 3", w.Next())
		}
	}
	ords, err := w.AppendAll(ctx, item("a", 10), item("b", 10))
	if err != nil || len(ords) != 2 || ords[0] != 3 || ords[1] != 4 {
		t.Fatalf("AppendAll = %v, %v", ords, err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, readAll(t, bus, "ro1"), 4)
}

func TestWriterDropsTransientEvents(t *testing.T) {
	_, bus := single(t)
	ctx := ctxT(t, 30*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{})
	for _, r := range []rollout.Record{meta("th1", "ro1"), userMsg("hi")} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []string{"agent_message_delta", "exec_command_begin", "item_started", "exec_approval_request", "warning", "stream_error"} {
		ord, err := w.Append(ctx, event(map[string]string{"type": kind}))
		if ord != 0 || err != nil {
			t.Fatalf("%s: ordinal %d, %v; want it dropped", kind, ord, err)
		}
	}
	if ord, err := w.Append(ctx, event(map[string]string{"type": rollout.EventAgentMessage, "message": "m"})); ord != 3 || err != nil {
		t.Fatalf("agent_message: ordinal %d, %v", ord, err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkContiguous(t, readAll(t, bus, "ro1"), 3)
}

func TestWriterPersistentFailureKeepsRecords(t *testing.T) {
	ts, bus := single(t)
	ctx := ctxT(t, 60*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{PublishTimeout: 200 * time.Millisecond, FailAfter: 2, BackoffMax: 100 * time.Millisecond})
	var recs []rollout.Record
	add := func(r rollout.Record) {
		t.Helper()
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	add(meta("th1", "ro1"))
	add(userMsg("before"))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	ts.stop() // the server goes away under the writer
	for i := 0; i < 20; i++ {
		add(item(id("during", i), 300)) // Append never blocks on I/O
	}
	err := w.Flush(ctx)
	var pe *PublishError
	if !errors.Is(err, ErrPublishFailing) || !errors.As(err, &pe) || pe.First != 3 {
		t.Fatalf("Flush with the server down: %v", err)
	}
	t.Log(err)
	if !errors.Is(w.Err(), ErrPublishFailing) {
		t.Fatalf("Err with the server down: %v", w.Err())
	}
	if n := len(w.Unacknowledged()); n != 20 {
		t.Fatalf("%d records kept, want 20", n)
	}

	ts.start() // same port, same store
	for i := 0; i < 5; i++ {
		add(item(id("after", i), 300))
	}
	// Flush reports failure until the retries get through; then it succeeds.
	waitFor(t, 30*time.Second, "the records to land after the restart", func() bool { return w.Flush(ctx) == nil })
	if w.Err() != nil || len(w.Unacknowledged()) != 0 {
		t.Fatalf("after recovery: %v, %d unacknowledged", w.Err(), len(w.Unacknowledged()))
	}
	es := readAll(t, bus, "ro1")
	checkContiguous(t, es, len(recs))
	for i, e := range es {
		if !bytes.Equal(append(bytes.Clone(e.Record.Raw), '\n'), expectLine(recs[i], int64(i+1))) {
			t.Fatalf("ordinal %d holds other bytes", i+1)
		}
	}
}

// TestFlushDeadlineSaysWhy: a Flush that runs out of time before FailAfter
// attempts failed still names why the last attempt failed, not only the
// deadline.
func TestFlushDeadlineSaysWhy(t *testing.T) {
	ts, bus := single(t)
	ctx := ctxT(t, 60*time.Second)
	l := take(t, bus, "th1", "test", false)
	w := openWriter(t, bus, l, "ro1", WriterOptions{PublishTimeout: 200 * time.Millisecond, FailAfter: 1000, BackoffMax: 100 * time.Millisecond})
	for _, r := range []rollout.Record{meta("th1", "ro1"), userMsg("before")} {
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ts.stop()
	if _, err := w.Append(ctx, item("during", 100)); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	err := w.Flush(short)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the last publish attempt failed: ") {
		t.Fatalf("Flush past its deadline with the server down: %v", err)
	}
	t.Log(err)
	ts.start() // so that the lease is released cleanly
	waitFor(t, 30*time.Second, "the record to land after the restart", func() bool { return w.Flush(ctx) == nil })
}
