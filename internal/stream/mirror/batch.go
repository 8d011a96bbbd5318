package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/stream"
)

// batch is one group of messages made durable together: every mirror file
// it touched is fsynced once, then the watermark moves past all of them.
type batch struct {
	m       *Mirror
	wm      uint64            // the watermark the batch started from
	locked  map[string]*ro    // rollouts whose lock the batch holds
	files   map[string]File   // mirror files open for appending
	opened  map[string]int64  // path -> its size (fsynced) when the batch opened it
	created bool              // a mirror file was created: fsync rollouts/
	qfiles  []*os.File        // quarantine files written
	last    uint64            // last sequence placed
	pending uint64            // the bus's pending count at the last message
	msgs    int               // messages placed
	records uint64            // records appended
	dups    uint64            // records found already mirrored
	refused map[string]uint64 // refusals by kind
	newQ    int               // refusals not in quarantine/ before
	touched map[string]int64  // rollout -> last ordinal appended
	// epochs holds, per rollout, the highest epoch of the packs the batch
	// appended. It reaches ro.epoch only once the watermark is written: a
	// failed batch's packs were not accepted, and its retry (which appends
	// them again) must not find them stale against their successors.
	epochs  map[string]uint64
	refs    []string // rollouts newly named by a history_base
	scratch []byte
	stored  []time.Time // store times, for OnCommit
}

// commit places a batch of messages and makes it durable. On an error
// nothing of the batch counts: the watermark stays, the rollouts it touched
// are reloaded from their files, and the caller restarts from the watermark
// (records already written are then found mirrored and skipped).
func (m *Mirror) commit(msgs []jetstream.Msg) (err error) {
	if err := m.cleanUp(); err != nil {
		return err
	}
	b := &batch{m: m, locked: map[string]*ro{}, files: map[string]File{}, opened: map[string]int64{}, refused: map[string]uint64{}, touched: map[string]int64{}, epochs: map[string]uint64{}}
	defer func() {
		if err != nil {
			b.cutBack()
		}
		b.release(err != nil)
	}()
	wm := m.Watermark()
	b.wm = wm
	tStart := time.Now()
	for _, msg := range msgs {
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("mirror: message metadata: %w", err)
		}
		seq := md.Sequence.Stream
		if seq <= wm || seq <= b.last {
			continue
		}
		faults.Point("mirror.after-ack")
		if err := b.place(msg.Subject(), seq, msg.Headers(), msg.Data()); err != nil {
			return err
		}
		b.last, b.pending = seq, md.NumPending
		if m.cfg.OnCommit != nil {
			b.stored = append(b.stored, md.Timestamp)
		}
		b.msgs++
	}
	if b.last == 0 {
		return nil
	}
	tPlaced := time.Now()
	files := make([]syncer, 0, len(b.files)+len(b.qfiles))
	for _, f := range b.files {
		files = append(files, f)
	}
	for _, f := range b.qfiles {
		files = append(files, f)
	}
	b.files, b.qfiles = nil, nil
	if err := syncFiles(files); err != nil {
		return fmt.Errorf("mirror: fsync: %w", err)
	}
	if b.created {
		if err := syncDir(m.rdir); err != nil {
			return err
		}
	}
	if len(b.refused) > 0 {
		if err := syncDir(m.qdir); err != nil {
			return err
		}
	}
	// The epochs the batch raised, journaled before the watermark that
	// covers them (a failed write is cut back: cleanUp).
	raised := epochEntry{Seq: b.last, Epochs: map[string]uint64{}}
	for id, e := range b.epochs {
		if e > b.locked[id].epoch {
			raised.Epochs[id] = e
		}
	}
	if err := m.appendEpochs(raised); err != nil {
		return err
	}
	synced := time.Now()
	faults.Point("mirror.before-watermark")
	m.mu.Lock()
	next := m.wm
	m.mu.Unlock()
	next.Seq = b.last
	if err := m.sf.write(next); err != nil {
		return err
	}
	m.log.Debug("mirror: batch durable", "watermark", b.last, "messages", b.msgs, "rollouts", len(b.touched),
		"place", time.Since(tStart)-time.Since(tPlaced), "fsync", synced.Sub(tPlaced), "watermark_write", time.Since(synced))
	m.mu.Lock()
	m.wm = m.sf.cur
	s := &m.st
	s.Watermark, s.Pending, s.Err = next.Seq, b.pending, ""
	s.Messages += uint64(b.msgs)
	s.Records += b.records
	s.Duplicates += b.dups
	s.Batches++
	for k, n := range b.refused {
		s.Quarantined += n
		s.QuarantinedByKind[k] += n
	}
	s.QuarantineFiles += b.newQ
	for id := range b.touched {
		m.dirty[id] = true
	}
	for id, e := range b.epochs {
		r := b.locked[id]
		r.epoch = max(r.epoch, e)
	}
	for _, id := range b.refs {
		m.refs[id] = true
	}
	m.mu.Unlock()
	b.release(false)
	if len(b.touched) > 0 && m.cfg.Index != nil {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	for _, id := range b.refs {
		if err := m.keepPlain(id); err != nil {
			m.log.Error("mirror: cannot re-materialize a newly referenced rollout", "rollout", id, "err", err)
		}
	}
	if m.cfg.OnCommit != nil {
		m.cfg.OnCommit(Commit{Seq: next.Seq, Messages: b.msgs, Synced: synced, Rollouts: b.touched, Stored: b.stored})
	}
	return nil
}

// cutBack runs when a batch failed: its writes and fsyncs may have
// reached the page cache but not the disk (after a failed fsync the kernel
// may report the next one clean), so every mirror file it opened is cut
// back to the size it had, which the last watermark vouched for, and
// fsynced. A file that cannot be is remembered in unclean and the mirror
// writes no watermark until it is (see cleanUp): the watermark never
// passes data that was not fsynced.
func (b *batch) cutBack() {
	for _, f := range b.files {
		f.Close()
	}
	b.files = nil
	for path, size := range b.opened {
		if b.m.unclean == nil {
			b.m.unclean = map[string]int64{}
		}
		b.m.unclean[path] = size
	}
	b.opened = nil
	if err := b.m.cleanUp(); err != nil {
		b.m.log.Error("mirror: cannot cut a mirror file back after a failed batch; retrying before the next batch", "err", err)
	}
}

// cleanUp cuts back and fsyncs the files a failed batch left unclean.
func (m *Mirror) cleanUp() error {
	for path, size := range m.unclean {
		if err := m.cutFile(path, size); err != nil {
			return fmt.Errorf("mirror: %s not yet cut back to its fsynced size %d: %w", path, size, err)
		}
		delete(m.unclean, path)
	}
	return nil
}

// cutFile truncates path to size and fsyncs it. A file that did not exist
// before the batch (size 0) is left empty, not removed: the rollouts/
// directory's fsync is then not needed for the cut.
func (m *Mirror) cutFile(path string, size int64) error {
	f, err := m.cfg.FS.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := m.cfg.FS.Truncate(path, size); err != nil {
		f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// release closes what the batch left open and unlocks its rollouts;
// failed forgets what the batch believed about them (where their files
// end: they are reloaded; the epochs of its packs were never kept).
func (b *batch) release(failed bool) {
	for _, f := range b.files {
		f.Close()
	}
	for _, f := range b.qfiles {
		f.Close()
	}
	b.files, b.qfiles = nil, nil
	for id, r := range b.locked {
		if failed {
			r.known = false
		}
		r.mu.Unlock()
		delete(b.locked, id)
	}
}

// lock takes a rollout's lock for the rest of the batch and loads it.
func (b *batch) lock(id string) (*ro, error) {
	if r := b.locked[id]; r != nil {
		return r, nil
	}
	r := b.m.rollout(id)
	r.mu.Lock()
	b.locked[id] = r
	if err := b.m.load(r); err != nil {
		return r, err
	}
	if r.aside != "" {
		// Set aside: rebuild it from the bus up to the watermark.
		if _, err := b.m.refetch(r, 0, b.wm); err != nil {
			b.m.log.Warn("mirror: cannot rebuild a set-aside rollout from the bus yet", "rollout", r.id, "err", err)
			if ioError(err) {
				return r, err
			}
		}
	}
	return r, nil
}

// futureEpoch refuses an epoch higher than any lease revision issued: one
// such pack would otherwise fence its thread for good. The revision is read
// again only when an epoch exceeds the last value read; a failed read is an
// error (the batch is retried), never a pass.
func (m *Mirror) futureEpoch(epoch uint64) (*refusal, error) {
	if m.issued == nil || epoch <= m.maxIssued {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := m.issued(ctx)
	if err != nil {
		return nil, fmt.Errorf("mirror: check epoch %d: %w", epoch, err)
	}
	m.maxIssued = max(m.maxIssued, rev)
	if epoch > m.maxIssued {
		return refuse(KindFutureEpoch, "epoch %d is above the last lease revision issued (%d)", epoch, m.maxIssued), nil
	}
	return nil, nil
}

// place mirrors one message, or quarantines it. Only a local failure (the
// disk) is an error.
func (b *batch) place(subject string, seq uint64, h nats.Header, data []byte) error {
	c, why := check(subject, seq, h, data)
	if why != nil {
		return b.quarantine(seq, subject, h, data, why)
	}
	p := c.pack
	if b.m.bus != nil {
		if err := b.m.bus.CheckRecordSizes(p); err != nil {
			return b.quarantine(seq, subject, h, data, refuse(KindTooLarge, "%v", err))
		}
	}
	if future, err := b.m.futureEpoch(p.Epoch); err != nil {
		return err
	} else if future != nil {
		return b.quarantine(seq, subject, h, data, future)
	}
	r, err := b.lock(c.rollout)
	if err != nil {
		return err
	}
	if r.zst && p.Last >= r.next {
		// It will be appended to: back to plain JSONL first. A .jsonl.zst
		// that cannot be read is set aside and rebuilt from the bus.
		if err := b.m.rematerialize(r); err != nil {
			if ioError(err) {
				return err
			}
			if err := b.m.setAside(r, b.m.zstPath(r.id), err.Error()); err != nil {
				return err
			}
			if _, err := b.m.refetch(r, 0, b.wm); err != nil {
				b.m.log.Warn("mirror: cannot rebuild a set-aside rollout from the bus yet", "rollout", r.id, "err", err)
				if ioError(err) {
					return err
				}
			}
		}
	}
	switch {
	case r.broken != "":
		return b.quarantine(seq, subject, h, data, refuse(KindMirrorDamaged, "%s", r.broken))
	case p.First > r.next:
		// The file lacks records the bus holds below the watermark (lost
		// while stopped, or a file set aside): read them again first.
		if _, err := b.m.refetch(r, p.First, b.wm); err != nil {
			b.m.log.Warn("mirror: cannot re-read what a mirror file lacks from the bus", "rollout", r.id, "err", err)
			if ioError(err) {
				return err
			}
		}
		if p.First == r.next {
			break
		}
		return b.quarantine(seq, subject, h, data, refuse(KindOrdinalGap,
			"ordinals %d-%d, the mirror file holds %d and expects %d next", p.First, p.Last, r.next-1, r.next))
	case p.Last >= r.next && p.Epoch < b.epoch(r):
		// The epoch half of the valid-tail rule (stream.Tail.Follows).
		if err := (stream.Tail{Ordinal: p.First - 1, Epoch: b.epoch(r)}).Follows(p); err != nil {
			return b.quarantine(seq, subject, h, data, refuse(KindStaleEpoch, "%v", err))
		}
	}
	skip := 0
	if p.First < r.next {
		upto := min(p.Last, r.next-1)
		have, err := b.m.mirrored(r, p.First, upto)
		if errors.Is(err, errDamaged) {
			return b.quarantine(seq, subject, h, data, refuse(KindMirrorDamaged, "cannot compare with the mirror file: %v", err))
		}
		if err != nil {
			return fmt.Errorf("mirror: rollout %s: %w", r.id, err)
		}
		for i, line := range have {
			if !bytes.Equal(line, p.Lines[i]) {
				return b.quarantine(seq, subject, h, data, refuse(KindOrdinalConflict,
					"ordinal %d differs from the record already mirrored", p.First+int64(i)))
			}
		}
		skip = len(have)
		b.dups += uint64(skip)
	}
	if c.ref != "" {
		b.refs = append(b.refs, c.ref)
	}
	if skip == len(p.Lines) {
		return nil
	}
	f, err := b.file(r)
	if err != nil {
		return err
	}
	buf := b.scratch[:0]
	for _, line := range p.Lines[skip:] {
		buf = append(append(buf, line...), '\n')
	}
	b.scratch = buf
	if faults.Armed("mirror.mid-append") && len(buf) > 1 {
		// Two writes, cut inside the last line, so that the crash point
		// leaves a torn tail.
		last := bytes.LastIndexByte(buf[:len(buf)-1], '\n') + 1
		cut := last + (len(buf)-last)/2
		if _, err := f.Write(buf[:cut]); err != nil {
			return fmt.Errorf("mirror: rollout %s: %w", r.id, err)
		}
		faults.Point("mirror.mid-append")
		buf = buf[cut:]
	}
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("mirror: rollout %s: append: %w", r.id, err)
	}
	r.next = p.Last + 1
	b.epochs[r.id] = max(b.epoch(r), p.Epoch)
	r.gen++
	b.touched[r.id] = p.Last
	b.records += uint64(len(p.Lines) - skip)
	return nil
}

// epoch is the highest epoch of r's accepted packs, this batch's included.
func (b *batch) epoch(r *ro) uint64 { return max(r.epoch, b.epochs[r.id]) }

// file opens a rollout's plain mirror file for appending, once per batch.
func (b *batch) file(r *ro) (File, error) {
	if f := b.files[r.id]; f != nil {
		return f, nil
	}
	path := b.m.plainPath(r.id)
	exists, err := isFile(path)
	if err != nil {
		return nil, err
	}
	f, err := b.m.cfg.FS.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mirror: rollout %s: %w", r.id, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mirror: rollout %s: %w", r.id, err)
	}
	if !exists {
		b.created = true
	}
	b.files[r.id] = f
	b.opened[path] = st.Size()
	return f, nil
}

func (b *batch) quarantine(seq uint64, subject string, h nats.Header, data []byte, why *refusal) error {
	files, again, err := b.m.quarantine(seq, subject, h, data, why)
	if err != nil {
		return err
	}
	b.qfiles = append(b.qfiles, files...)
	b.refused[why.kind]++
	if !again {
		b.newQ++
	}
	return nil
}
