package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/logbook-agents/logbook/internal/dedupe"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// TestProtocolRawAgent: an agent that speaks docs/PROTOCOL.md with core
// NATS requests alone (lines, crcs, packs, KV writes built by hand) takes a
// lease, writes a session_meta and two turns, and sends mail that a Go
// thread receives. The served coordinator mirrors exactly its valid packs,
// replay and the delivery ledger read them, the doc's valid-tail rule
// finds the same tail as the Go writer, and a publish breaking each rule is
// refused by the server or quarantined under the kind the doc names.
func TestProtocolRawAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the coordinator binary")
	}
	bin := coordinatorBin(t)
	srv := serveOnFreePorts(t, bin)
	a := newRawAgent(t, srv.natsURL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(srv.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bus, err := stream.Open(ctx, nc, stream.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	peer := openGoThread(t, ctx, bus, "go-peer", "go-peer-r1")

	const thread, rid = "raw-agent", "raw-agent-r1"
	subj := "rollout." + rid
	now := time.Now().UTC().Format(time.RFC3339)
	holder := "raw-agent@" + t.Name()
	expect0 := [][2]string{{"Nats-Expected-Last-Subject-Sequence", "0"}}

	// The lease: a KV create; its revision is the epoch.
	epoch := a.mustStore("$KV.LEASES."+thread, expect0, fmt.Appendf(nil, `{"holder":%q,"taken":%q,"renewed":%q}`, holder, now, now))
	if info, err := bus.ReadLease(ctx, thread); err != nil || info == nil || info.Holder != holder || info.Epoch != epoch {
		t.Fatalf("a Go reader sees the lease as %+v (%v), want holder %s epoch %d", info, err, holder, epoch)
	}
	var held *stream.LeaseHeldError
	if _, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: "go"}); !errors.As(err, &held) || held.Holder != holder {
		t.Fatalf("a Go writer taking the live lease: %v, want a LeaseHeldError naming %s", err, holder)
	}
	if ack := a.publish("$KV.LEASES."+thread, expect0, []byte(`{"holder":"other"}`)); ack.Error == nil || ack.Error.ErrCode != 10071 {
		t.Fatalf("a second KV create of a held lease: %+v, want error 10071", ack)
	}

	// The tail of a new rollout: nothing on its subject.
	if m := a.get("ROLLOUTS", map[string]any{"last_by_subj": subj}); m != nil {
		t.Fatalf("a new rollout's subject holds seq %d", m.Seq)
	}
	var accepted []string // every line the mirror must hold, in order
	last := uint64(0)     // the subject's last stream sequence, valid or not
	write := func(first int64, ep uint64, lines ...string) uint64 {
		t.Helper()
		data := packData(lines...)
		last = a.mustStore(subj, packHeaders(rid, first, first+int64(len(lines))-1, ep, last, data), data)
		accepted = append(accepted, lines...)
		return last
	}
	ts := "2026-12-01T11:00:00.000Z"
	write(1, epoch, line(ts, 1, "session_meta", `{"id":"raw-agent","rollout_id":"raw-agent-r1","source":"raw","cwd":"/tmp","history_mode":"legacy","schema_version":1}`))
	a.mustStore("$KV.THREADS."+thread, expect0, []byte(rid))
	if cur, err := bus.RecordThread(ctx, thread, "another-rollout"); err != nil || cur != rid {
		t.Fatalf("THREADS after the raw create: %q, %v; want %s", cur, err, rid)
	}

	// A renewal is a CAS update that keeps the epoch.
	rev := a.mustStore("$KV.LEASES."+thread, [][2]string{{"Nats-Expected-Last-Subject-Sequence", fmt.Sprint(epoch)}},
		fmt.Appendf(nil, `{"holder":%q,"epoch":%d,"taken":%q,"renewed":%q}`, holder, epoch, now, now))
	if info, err := bus.ReadLease(ctx, thread); err != nil || info == nil || info.Epoch != epoch || info.Revision != rev {
		t.Fatalf("after the renewal a Go reader sees %+v (%v), want epoch %d revision %d", info, err, epoch, rev)
	}

	// Turn t1: the body in one pack, the send flushed before its publish,
	// the terminal record alone in a later pack.
	bodySeq := write(2, epoch,
		line(ts, 2, "event_msg", `{"type":"task_started","turn_id":"t1"}`),
		line(ts, 3, "turn_context", `{"turn_id":"t1","model":"gpt-5","approval_policy":"never"}`),
		line(ts, 4, "response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"say hello to go-peer"}]}`),
		line(ts, 5, "event_msg", `{"type":"user_message","message":"say hello to go-peer"}`))
	note := `{"type":"inter_agent_sent","msg_id":"raw-note-1","idempotency_key":"note:raw-1","to_thread":"go-peer","kind":"note","body":{"text":"hello from a raw agent"}}`
	write(6, epoch,
		line(ts, 6, "response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"sent"}]}`),
		line(ts, 7, "event_msg", note))
	mailHdr := [][2]string{{"Nats-Msg-Id", "raw-note-1"}, {"Logbook-From", thread}}
	a.mustStore("mail.go-peer", mailHdr, []byte(note))
	if ack := a.publish("mail.go-peer", mailHdr, []byte(note)); !ack.Duplicate || ack.Error != nil {
		t.Fatalf("a re-send under the same msg id: %+v, want a duplicate ack", ack)
	}
	write(8, epoch, line(ts, 8, "event_msg", `{"type":"task_complete","turn_id":"t1"}`))

	// Each rule broken once. Every publish but the first expects the
	// subject's real last sequence, so the server stores it and the mirror
	// must be the one to refuse it.
	refused := map[uint64]string{}
	junk := func(kind string, p rawPack) {
		t.Helper()
		ack := a.publish(subj, p.hdr, p.data)
		if ack.Error != nil || ack.Seq == 0 || ack.Duplicate {
			t.Fatalf("%s: the server did not store the pack: %+v (error %+v)", kind, ack, ack.Error)
		}
		last = ack.Seq
		refused[ack.Seq] = kind
	}
	next := line(ts, 9, "event_msg", `{"type":"task_started","turn_id":"t2"}`)
	nextData := packData(next)

	// A stale expected sequence: refused by the server, nothing stored.
	if ack := a.publish(subj, packHeaders(rid, 9, 9, epoch, bodySeq, nextData), nextData); ack.Error == nil || ack.Error.ErrCode != 10071 {
		t.Fatalf("a pack expecting an old sequence: %+v, want error 10071", ack)
	}
	if m := a.get("ROLLOUTS", map[string]any{"last_by_subj": subj}); m == nil || m.Seq != last {
		t.Fatalf("the refused pack was stored: the subject ends at %v, want %d", m, last)
	}
	// Distinct spans: a pack's msg id is the server's dedupe key, so two
	// packs with the same ordinals and epoch would be one.
	filler := func(from, to int64) []string {
		var ls []string
		for o := from; o <= to; o++ {
			ls = append(ls, line(ts, o, "event_msg", `{"type":"agent_message","message":"junk"}`))
		}
		return ls
	}
	pack := func(first int64, ep uint64, lines ...string) rawPack {
		data := packData(lines...)
		return rawPack{packHeaders(rid, first, first+int64(len(lines))-1, ep, last, data), data}
	}
	badCRC := strings.Replace(next, `"crc":"`+crc32c([]byte(`{"type":"task_started","turn_id":"t2"}`)), `"crc":"deadbeef`, 1)
	junk("crc_mismatch", pack(9, epoch, badCRC))
	p := pack(9, epoch, append([]string{next}, filler(10, 10)...)...)
	p.hdr[5][1] = "00000000" // Logbook-CRC
	junk("crc_mismatch", p)
	junk("ordinal_gap", pack(11, epoch, line(ts, 11, "event_msg", `{"type":"task_started","turn_id":"t2"}`)))
	noCRC := `{"timestamp":"` + ts + `","ordinal":9,"type":"event_msg","payload":{"type":"task_started","turn_id":"t2"}}`
	junk("bad_record", pack(9, epoch, append([]string{noCRC}, filler(10, 11)...)...))
	junk("future_epoch", pack(9, a.streamLastSeq("KV_LEASES")+1000, next))
	junk("too_large", pack(9, epoch, append([]string{bigLine(ts, bus.RecordLimit()+1)}, filler(10, 12)...)...))

	// A takeover (a CAS update on the current revision) gives a higher
	// epoch; the old epoch is then stale.
	epoch2 := a.mustStore("$KV.LEASES."+thread, [][2]string{{"Nats-Expected-Last-Subject-Sequence", fmt.Sprint(rev)}},
		fmt.Appendf(nil, `{"holder":%q,"taken":%q,"renewed":%q}`, holder+"-2", now, now))
	write(9, epoch2, next)
	stale := packData(line(ts, 10, "event_msg", `{"type":"task_complete","turn_id":"t2"}`))
	junk("stale_epoch", rawPack{packHeaders(rid, 10, 10, epoch, last, stale), stale})
	write(10, epoch2, line(ts, 10, "event_msg", `{"type":"task_complete","turn_id":"t2"}`))
	if ack := a.publish("$KV.LEASES."+thread, [][2]string{{"KV-Operation", "DEL"}, {"Nats-Expected-Last-Subject-Sequence", fmt.Sprint(epoch2)}}, nil); ack.Error != nil {
		t.Fatalf("release: %+v", ack.Error)
	}

	// The doc's valid-tail rule, applied by hand, and the Go writer's agree.
	ord, ep, lastSeen := a.validTail(rid, bus.RecordLimit())
	if ord != 10 || ep != epoch2 || lastSeen != last {
		t.Fatalf("the doc's valid-tail rule finds ordinal %d epoch %d last seq %d; want 10, %d, %d", ord, ep, lastSeen, epoch2, last)
	}
	tail, _, goLast, err := bus.ValidTail(ctx, rid)
	if err != nil || tail.Ordinal != ord || tail.Epoch != ep || goLast != lastSeen {
		t.Fatalf("the Go writer's valid tail is %+v last %d (%v); the doc's rule found ordinal %d epoch %d last %d", tail, goLast, err, ord, ep, lastSeen)
	}
	lease, err := bus.TakeLease(ctx, thread, stream.LeaseOptions{Holder: "go"})
	if err != nil {
		t.Fatalf("a Go writer after the raw agent released: %v", err)
	}
	w, err := bus.OpenWriter(ctx, lease, rid, stream.WriterOptions{})
	if err != nil || w.Next() != 11 {
		t.Fatalf("a Go writer resuming the raw rollout: %v, next ordinal %d; want 11", err, w.Next())
	}
	w.Close(ctx)
	lease.Release(ctx)

	// The Go peer receives the raw agent's note through the delivery protocol.
	got := peer.receive(t, ctx, 1)
	if len(got) != 1 || got[0].MsgID != "raw-note-1" || got[0].FromThread != thread || got[0].Kind != "note" ||
		string(got[0].Body) != `{"text":"hello from a raw agent"}` {
		t.Fatalf("the Go peer received %+v", got)
	}
	peer.close(t, ctx)

	srv.mirrored(t, a)
	mirrorFile := filepath.Join(srv.dir, "rollouts", rid+".jsonl")
	b, err := os.ReadFile(mirrorFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := packData(accepted...); !bytes.Equal(b, want) {
		t.Fatalf("the mirror file differs from the valid packs:\n%s\nwant\n%s", b, want)
	}
	q := srv.quarantined(t)
	for seq, kind := range refused {
		e, ok := q[seq]
		switch {
		case !ok:
			t.Errorf("seq %d (%s) is not in quarantine/", seq, kind)
		case e.Kind != kind || e.Subject != subj:
			t.Errorf("seq %d quarantined as %s on %s, want %s on %s (%s)", seq, e.Kind, e.Subject, kind, subj, e.Reason)
		}
		msg, err := os.ReadFile(filepath.Join(srv.dir, "quarantine", strconv.FormatUint(seq, 10)+".msg"))
		if err != nil || len(msg) != e.Size {
			t.Errorf("quarantine/%d.msg: %d bytes (%v), the .json says %d", seq, len(msg), err, e.Size)
		}
	}
	if len(q) != len(refused) {
		t.Errorf("quarantine/ holds %d messages, want %d: %+v", len(q), len(refused), q)
	}

	var st struct {
		Turns []struct {
			TurnID string `json:"turn_id"`
			Status string `json:"status"`
			User   bool   `json:"user"`
		} `json:"turns"`
		DanglingCalls []json.RawMessage `json:"dangling_calls"`
	}
	if err := json.Unmarshal(runCoordinator(t, bin, "replay", mirrorFile, "--json"), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Turns) != 2 || st.Turns[0].TurnID != "t1" || st.Turns[0].Status != "completed" || !st.Turns[0].User ||
		st.Turns[1].TurnID != "t2" || st.Turns[1].Status != "completed" || len(st.DanglingCalls) != 0 {
		t.Fatalf("replay of the raw rollout: %+v", st)
	}
	deliveries := unconfirmedReport(t, bin, srv.dir)
	if deliveries.Confirmed != 1 || len(deliveries.Deliveries) != 0 {
		t.Fatalf("unconfirmed --data: %+v, want the note confirmed", deliveries)
	}
	runCoordinator(t, bin, "verify", "--data", srv.dir)
}

// validTail is docs/PROTOCOL.md's "Finding the tail", step by step: the
// last pack of the rollout that passes the pack and record checks, claims
// no epoch above the last lease revision issued, and follows the tail so far
// (ordinals continuing, epochs not decreasing); and the subject's last
// sequence. (The ID checks are left out: this rollout's IDs are valid.)
func (a *rawAgent) validTail(rid string, limit int) (ordinal int64, epoch, last uint64) {
	a.t.Helper()
	issued := a.streamLastSeq("KV_LEASES")
	for s := uint64(1); ; {
		m := a.get("ROLLOUTS", map[string]any{"seq": s, "next_by_subj": "rollout." + rid})
		if m == nil {
			return ordinal, epoch, last
		}
		last, s = m.Seq, m.Seq+1
		first, lastOrd, ep, ok := checkPack(rid, m, limit)
		if ok && ep <= issued && first == ordinal+1 && ep >= epoch {
			ordinal, epoch = lastOrd, ep
		}
	}
}

// checkPack applies the doc's pack and record checks to a stored message.
func checkPack(rid string, m *storedMsg, limit int) (first, last int64, epoch uint64, ok bool) {
	h := m.Header
	var err1, err2, err3 error
	first, err1 = strconv.ParseInt(h.Get("Logbook-First"), 10, 64)
	last, err2 = strconv.ParseInt(h.Get("Logbook-Last"), 10, 64)
	epoch, err3 = strconv.ParseUint(h.Get("Logbook-Epoch"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || first < 1 || last < first || h.Get("Logbook-Pack") != "1" ||
		h.Get("Nats-Msg-Id") != fmt.Sprintf("%s:%d-%d:%d", rid, first, last, epoch) ||
		h.Get("Logbook-CRC") != crc32c(m.Data) || !bytes.HasSuffix(m.Data, []byte("\n")) {
		return first, last, epoch, false
	}
	lines := bytes.Split(m.Data[:len(m.Data)-1], []byte("\n"))
	if int64(len(lines)) != last-first+1 {
		return first, last, epoch, false
	}
	for i, l := range lines {
		var rec struct {
			Ordinal int64           `json:"ordinal"`
			CRC     string          `json:"crc"`
			Payload json.RawMessage `json:"payload"`
		}
		if len(l)+1 > limit || json.Unmarshal(l, &rec) != nil || rec.Ordinal != first+int64(i) || rec.CRC != crc32c(rec.Payload) {
			return first, last, epoch, false
		}
	}
	return first, last, epoch, true
}

// rawPack is a pack's headers and payload.
type rawPack struct {
	hdr  [][2]string
	data []byte
}

// bigLine is an agent_message record line of exactly n bytes with its '\n'.
func bigLine(ts string, n int) string {
	base := len(line(ts, 9, "event_msg", `{"type":"agent_message","message":""}`)) + 1
	return line(ts, 9, "event_msg", `{"type":"agent_message","message":"`+strings.Repeat("x", n-base)+`"}`)
}

// unconfirmedReport runs `coordinator unconfirmed --data DIR --json`.
func unconfirmedReport(t *testing.T, bin, dir string) (r struct {
	ChildResults []json.RawMessage `json:"child_results"`
	Deliveries   []json.RawMessage `json:"deliveries"`
	Confirmed    int               `json:"confirmed"`
}) {
	t.Helper()
	if err := json.Unmarshal(runCoordinator(t, bin, "unconfirmed", "--data", dir, "--json"), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// goThread is a thread written by Logbook's own Go writer: the other side
// of a raw agent's mail.
type goThread struct {
	id    string
	lease *stream.Lease
	w     *stream.Writer
	bus   *stream.Bus
}

func openGoThread(t *testing.T, ctx context.Context, bus *stream.Bus, id, rid string) *goThread {
	t.Helper()
	lease, err := bus.TakeLease(ctx, id, stream.LeaseOptions{Holder: "go-" + id})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.OpenWriter(ctx, lease, rid, stream.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := &goThread{id: id, lease: lease, w: w, bus: bus}
	g.append(t, ctx, func(b *rollout.Builder) rollout.Record {
		return b.Meta(rollout.SessionMeta{ID: id, RolloutID: rid, Source: rollout.Source{Kind: "e2e"}, Cwd: "/tmp", HistoryMode: rollout.HistoryLegacy})
	})
	w.Materialize()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.RecordThread(ctx, id, rid); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *goThread) append(t *testing.T, ctx context.Context, build func(b *rollout.Builder) rollout.Record) {
	t.Helper()
	b := rollout.Builder{Next: g.w.Next()}
	if _, err := g.w.Append(ctx, build(&b)); err != nil {
		t.Fatal(err)
	}
}

// receive takes n messages in a turn of its own: receipts logged and
// flushed before each ack (dedupe.ReceiveMail), then the turn ended with
// both barriers.
func (g *goThread) receive(t *testing.T, ctx context.Context, n int) []dedupe.Received {
	t.Helper()
	turn := fmt.Sprintf("recv-%d", g.w.Next())
	g.append(t, ctx, func(b *rollout.Builder) rollout.Record { return b.TaskStarted(turn) })
	mb, err := g.bus.Mailbox(ctx, g.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []dedupe.Received
	for deadline := time.Now().Add(20 * time.Second); len(got) < n && time.Now().Before(deadline); {
		r, err := dedupe.ReceiveMail(ctx, g.w, mb, n-len(got), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r...)
	}
	b := rollout.Builder{Next: g.w.Next()}
	if _, err := g.w.EndTurn(ctx, b.TaskComplete(turn), nil); err != nil {
		t.Fatal(err)
	}
	return got
}

func (g *goThread) close(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := g.w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
