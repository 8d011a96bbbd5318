package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// ioError reports whether err is the file system failing (EIO, a full
// disk, a permission), which fails the batch and is retried, rather than a
// file's content or kind being wrong, which sets that file aside.
func ioError(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno) && !errors.Is(err, syscall.EISDIR)
}

// setAside moves r's damaged mirror file (or whatever sits at its name)
// into quarantine/damaged/ with the reason, so that its rollout starts
// again from an empty file that the bus refills (see refetch) while every
// other rollout keeps flowing. r.mu is held.
func (m *Mirror) setAside(r *ro, path, why string) error {
	dir := filepath.Join(m.qdir, datadir.Damaged)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mirror: rollout %s: set aside: %w", r.id, err)
	}
	dst := filepath.Join(dir, filepath.Base(path)+"."+time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := writeAtomic(m.cfg.FS, dst+".reason", []byte(path+": "+why+"\n")); err != nil {
		return fmt.Errorf("mirror: rollout %s: set aside: %w", r.id, err)
	}
	r.repr.Lock()
	err := m.cfg.FS.Rename(path, dst)
	r.repr.Unlock()
	if err != nil {
		return fmt.Errorf("mirror: rollout %s: set aside: %w", r.id, err)
	}
	if err := errors.Join(syncDir(dir), syncDir(m.rdir)); err != nil {
		return err
	}
	m.log.Error("mirror: damaged mirror file set aside; rebuilding it from the bus", "rollout", r.id, "why", why, "kept", dst)
	r.aside, r.broken, r.next, r.zst, r.known = why, "", 1, false, true
	m.count(func(s *Status) {
		s.SetAside++
		if s.Damaged == nil {
			s.Damaged = map[string]string{}
		}
		s.Damaged[r.id] = why + " (set aside in " + dst + ")"
	})
	return nil
}

// refetch appends to r's mirror file the records it lacks, read from the
// bus by the valid-tail rule (stream.Bus.ValidPacks: junk, stale and forged
// packs are skipped, as the consumer quarantines them): those of packs at
// or below maxSeq, the watermark (what is above it the consumer brings), and
// below ordinal before (0: no bound). The
// records are fsynced before it returns. A rollout set aside is repaired
// once refetch has brought it up to the watermark. r.mu is held.
func (m *Mirror) refetch(r *ro, before int64, maxSeq uint64) (int, error) {
	if m.bus == nil || (before > 0 && r.next >= before) {
		return 0, nil
	}
	ctx := m.runCtx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, refetchTimeout)
	defer cancel()
	var buf []byte
	start := r.next
	next, complete, why := start, false, ""
	var epoch uint64
	errDone := errors.New("done")
	tail, last, err := m.bus.ValidPacks(ctx, r.id, func(p *stream.Packed) error {
		if p.Seq > maxSeq || (before > 0 && p.First >= before) {
			complete = true
			return errDone
		}
		for i, line := range p.Lines {
			ord := p.First + int64(i)
			if ord < next {
				continue
			}
			if before > 0 && ord >= before {
				complete = true
				return errDone
			}
			buf = append(append(buf, line...), '\n')
			next++
		}
		epoch = p.Epoch
		return nil
	})
	switch {
	case errors.Is(err, errDone):
	case err != nil:
		why = err.Error()
	case tail.Seq >= last:
		complete = true
	default:
		// Messages after the valid tail (purged records, junk, stale or
		// forged packs): what the file lacked may be gone from the bus.
		why = fmt.Sprintf("the bus holds no valid pack after ordinal %d (stream sequence %d), but messages up to sequence %d", tail.Ordinal, tail.Seq, last)
	}
	if epoch > r.epoch {
		// Journaled before the lines: the packs are at or below the
		// watermark, and a crash before the lines are in re-reads them.
		if err := m.appendEpochs(epochEntry{Seq: maxSeq, Epochs: map[string]uint64{r.id: epoch}}); err != nil {
			return 0, err
		}
	}
	if len(buf) > 0 {
		if err := m.appendSync(r, buf); err != nil {
			return 0, err
		}
		n := next - start
		m.log.Warn("mirror: records the mirror file lacked re-read from the bus", "rollout", r.id,
			"ordinals", strconv.FormatInt(r.next, 10)+"-"+strconv.FormatInt(next-1, 10))
		r.next = next
		r.gen++
		m.count(func(s *Status) { s.Refetched += uint64(n) })
	}
	// The packs read are in the file, fsynced, below the watermark: accepted.
	r.epoch = max(r.epoch, epoch)
	switch {
	case r.aside != "" && complete:
		r.aside = ""
		m.log.Info("mirror: set-aside rollout rebuilt from the bus", "rollout", r.id, "next", r.next)
		m.count(func(s *Status) { delete(s.Damaged, r.id) })
	case r.aside != "":
		m.count(func(s *Status) {
			s.Damaged[r.id] = r.aside + "; not rebuilt past ordinal " + strconv.FormatInt(r.next-1, 10) + ": " + why
		})
	}
	return int(next - start), nil
}

// refetchTimeout bounds one rollout's re-read from the bus.
const refetchTimeout = time.Minute

// refetchAll runs when the mirror starts: every rollout whose file lacks
// records the bus holds below the watermark (a file truncated while the
// coordinator was stopped, a file set aside) gets them again, before any
// more is appended. It costs one read of each file's last line and one
// message get per rollout. A rollout that cannot be repaired now is logged
// and left for its next message (see place).
func (m *Mirror) refetchAll(ctx context.Context) error {
	ents, err := os.ReadDir(m.rdir)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(strings.TrimSuffix(e.Name(), zstExt), datadir.JSONLExt)
		if !ok || seen[id] || rollout.ValidateID("rollout id", id) != nil {
			continue
		}
		seen[id] = true
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := m.refetchOne(ctx, id); err != nil {
			if ioError(err) {
				return err
			}
			m.log.Warn("mirror: cannot check a mirror file against the bus at start-up", "rollout", id, "err", err)
		}
	}
	return nil
}

func (m *Mirror) refetchOne(ctx context.Context, id string) error {
	r := m.rollout(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := m.load(r); err != nil || r.broken != "" {
		return err
	}
	wm := m.Watermark()
	if r.aside == "" {
		tail, err := m.bus.Tail(ctx, id)
		switch {
		case errors.Is(err, stream.ErrBadPack):
			return nil // junk
		case err != nil:
			return err
		case tail.Ordinal < r.next:
			return nil // nothing lacking (or an empty rollout)
		}
	}
	if r.zst {
		if err := m.rematerialize(r); err != nil {
			return err
		}
	}
	_, err := m.refetch(r, 0, wm)
	return err
}

// appendSync appends lines to r's plain mirror file and fsyncs it (and
// rollouts/ when it created the file).
func (m *Mirror) appendSync(r *ro, buf []byte) error {
	path := m.plainPath(r.id)
	exists, err := isFile(path)
	if err != nil {
		return err
	}
	f, err := m.cfg.FS.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("mirror: rollout %s: %w", r.id, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("mirror: rollout %s: %w", r.id, err)
	}
	_, werr := f.Write(buf)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		// Not fsynced: cut back, as a failed batch does.
		if m.unclean == nil {
			m.unclean = map[string]int64{}
		}
		m.unclean[path] = st.Size()
		return fmt.Errorf("mirror: rollout %s: refetch: %w", r.id, err)
	}
	if !exists {
		return syncDir(m.rdir)
	}
	return nil
}

// notFile reports whether something other than a regular file sits at
// path (a directory, a FIFO): the mirror cannot use it.
func notFile(path string) (bool, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !st.Mode().IsRegular(), nil
}
