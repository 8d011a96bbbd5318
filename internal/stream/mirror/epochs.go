package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// The epoch journal (datadir.MirrorEpochs) makes each rollout's highest
// accepted epoch outlive the process: the stale_epoch check must hold
// across a restart or a crash, and the mirror files' lines do not carry
// the epoch of the pack they came in. It is a sequence of lines
//
//	<crc> {"seq":N,"epochs":{"<rollout_id>":E,...}}\n
//
// (crc: CRC-32C of the JSON, rollout.Checksum). An entry says that the
// packs mirrored up to stream sequence N raised these rollouts' highest
// accepted epoch to E; a rollout's epoch is the highest E of the entries
// naming it. A batch appends its entry (only the rollouts whose epoch it
// raised) and fsyncs it after its mirror files and before its watermark;
// a re-read from the bus (refetch) appends one at the current watermark
// before its lines. Part of the data dir format: do not change, add fields.
//
// At Open:
//   - an unterminated last line is a write cut short (its batch never wrote
//     its watermark): it is cut off;
//   - entries past the watermark belong to a batch that never wrote it (a
//     crash between the journal's fsync and the watermark's): they are cut
//     off, so that their epochs are never believed (the batch is received
//     again and appends its entry again);
//   - any other damage (a crc mismatch, a line that does not parse, an
//     entry past the watermark followed by one below it) sets the file
//     aside into quarantine/damaged/ with its reason, and the journal is
//     rebuilt from the bus (below), never taken as empty;
//   - a missing journal with a watermark above 0 (a data dir from before
//     the journal, or the file lost) is rebuilt the same way; with a
//     watermark of 0 nothing was accepted and the journal starts empty;
//   - a journal holding many more entries than rollouts is compacted
//     (rewritten by temp file, fsync, rename, directory fsync).
//
// The rebuild reads every mirrored rollout's packs from the bus by the
// valid-tail rule (stream.Bus.ValidPacks), those at or below the
// watermark, and takes the epoch of the last one accepted (epochs never
// decrease along it). Run does it before consuming anything, retrying
// while the bus cannot answer; the journal is written (a snapshot) only
// once it is complete.
type epochJournal struct {
	path string
	fs   FS
	f    File  // open for appending; nil until opened or after a failure
	size int64 // bytes the journal holds, all fsynced
	n    int   // entries
	// rebuild: the journal was missing or damaged and must be rebuilt from
	// the bus before any batch runs (no batch may append to it meanwhile).
	rebuild bool
}

type epochEntry struct {
	Seq    uint64            `json:"seq"`
	Epochs map[string]uint64 `json:"epochs"`
}

func encodeEntry(e epochEntry) ([]byte, error) {
	js, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(rollout.Checksum(js)+" "), js...), '\n'), nil
}

// decodeEntry reads one line (without its '\n').
func decodeEntry(line []byte) (epochEntry, error) {
	var e epochEntry
	if len(line) < 10 || line[8] != ' ' {
		return e, errors.New("not <crc> <json>")
	}
	js := line[9:]
	if rollout.Checksum(js) != string(line[:8]) {
		return e, errors.New("crc mismatch")
	}
	if err := json.Unmarshal(js, &e); err != nil {
		return e, err
	}
	return e, nil
}

// openEpochs reads the journal of dir against watermark wm and returns
// each rollout's highest accepted epoch. It repairs what a crash leaves
// (see epochJournal) and sets a damaged journal aside; j.rebuild then says
// the epochs must be read from the bus first.
func (m *Mirror) openEpochs(wm uint64) (*epochJournal, map[string]uint64, error) {
	j := &epochJournal{path: filepath.Join(m.dir, datadir.MirrorEpochs), fs: m.cfg.FS}
	data, err := os.ReadFile(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		if wm == 0 {
			// Created as mirror.state is, by the OS directly: nothing is
			// accepted yet, nothing for the FS seam to vouch for.
			if err := writeAtomic(&osFS{}, j.path, nil); err != nil {
				return nil, nil, fmt.Errorf("mirror: create %s: %w", j.path, err)
			}
			return j, map[string]uint64{}, nil
		}
		m.log.Warn("mirror: no epoch journal; rebuilding it from the bus before mirroring", "file", j.path, "watermark", wm)
		j.rebuild = true
		return j, map[string]uint64{}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: %w", err)
	}
	epochs := map[string]uint64{}
	var good int64 // bytes of the entries kept
	var damage string
	past := false // an entry past the watermark was seen
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			m.log.Warn("mirror: epoch journal's last entry cut short (a crash); cutting it off", "file", j.path, "offset", off)
			break
		}
		e, err := decodeEntry(data[off : off+nl])
		switch {
		case err != nil:
			damage = fmt.Sprintf("entry at offset %d: %v", off, err)
		case e.Seq > wm:
			past = true
		case past:
			damage = fmt.Sprintf("entry at offset %d (sequence %d) follows one past the watermark %d", off, e.Seq, wm)
		default:
			for id, ep := range e.Epochs {
				epochs[id] = max(epochs[id], ep)
			}
			j.n++
			good = int64(off + nl + 1)
		}
		if damage != "" {
			break
		}
		off += nl + 1
	}
	if damage != "" {
		if err := m.setAsideJournal(j.path, damage); err != nil {
			return nil, nil, err
		}
		j.rebuild = true
		return j, map[string]uint64{}, nil
	}
	if j.n > 2*len(epochs)+64 {
		return j, epochs, j.write(epochs, wm)
	}
	if good < int64(len(data)) {
		if err := m.cutFile(j.path, good); err != nil {
			return nil, nil, fmt.Errorf("mirror: cut back %s: %w", j.path, err)
		}
	}
	j.size = good
	return j, epochs, nil
}

// setAsideJournal moves a damaged journal into quarantine/damaged/ with
// its reason.
func (m *Mirror) setAsideJournal(path, why string) error {
	dir := filepath.Join(m.qdir, datadir.Damaged)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mirror: set aside %s: %w", path, err)
	}
	dst := filepath.Join(dir, filepath.Base(path)+"."+time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := writeAtomic(m.cfg.FS, dst+".reason", []byte(path+": "+why+"\n")); err != nil {
		return fmt.Errorf("mirror: set aside %s: %w", path, err)
	}
	if err := m.cfg.FS.Rename(path, dst); err != nil {
		return fmt.Errorf("mirror: set aside %s: %w", path, err)
	}
	if err := errors.Join(syncDir(dir), syncDir(m.dir)); err != nil {
		return err
	}
	m.log.Error("mirror: epoch journal damaged, set aside; rebuilding it from the bus before mirroring", "why", why, "kept", dst)
	return nil
}

// write replaces the journal with a snapshot of epochs at sequence seq
// (temp file, fsync, rename, directory fsync), in entries of at most 1000
// rollouts.
func (j *epochJournal) write(epochs map[string]uint64, seq uint64) error {
	j.closeFile()
	var buf []byte
	n := 0
	ids := slices.Sorted(maps.Keys(epochs))
	for len(ids) > 0 {
		k := min(len(ids), 1000)
		e := epochEntry{Seq: seq, Epochs: map[string]uint64{}}
		for _, id := range ids[:k] {
			e.Epochs[id] = epochs[id]
		}
		line, err := encodeEntry(e)
		if err != nil {
			return err
		}
		buf = append(buf, line...)
		ids = ids[k:]
		n++
	}
	if err := writeAtomic(j.fs, j.path, buf); err != nil {
		return fmt.Errorf("mirror: write %s: %w", j.path, err)
	}
	j.size, j.n, j.rebuild = int64(len(buf)), n, false
	return nil
}

// appendEpochs appends an entry and fsyncs it. On a failure the journal is
// left to the caller's clean-up (unclean: cut back to size) and reopened
// on the next append.
func (m *Mirror) appendEpochs(e epochEntry) error {
	j := m.ej
	if len(e.Epochs) == 0 {
		return nil
	}
	if j.rebuild {
		return fmt.Errorf("mirror: %s not yet rebuilt", j.path)
	}
	if size, ok := m.unclean[j.path]; ok {
		if err := m.cutFile(j.path, size); err != nil {
			return fmt.Errorf("mirror: %s not yet cut back to its fsynced size %d: %w", j.path, size, err)
		}
		delete(m.unclean, j.path)
	}
	line, err := encodeEntry(e)
	if err != nil {
		return err
	}
	if j.f == nil {
		if j.f, err = j.fs.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return fmt.Errorf("mirror: epoch journal: %w", err)
		}
	}
	_, werr := j.f.Write(line)
	if err := errors.Join(werr, j.f.Sync()); err != nil {
		// Sticky, as for the mirror files: cut back to what was fsynced
		// before any later write or watermark.
		j.closeFile()
		if m.unclean == nil {
			m.unclean = map[string]int64{}
		}
		m.unclean[j.path] = j.size
		return fmt.Errorf("mirror: epoch journal %s: %w", j.path, err)
	}
	j.size += int64(len(line))
	j.n++
	return nil
}

func (j *epochJournal) closeFile() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// rebuildEpochs reads the highest accepted epoch of every mirrored rollout
// from the bus (ValidPacks, packs at or below the watermark) and writes
// the journal as a snapshot. Run calls it before consuming when the
// journal was missing or damaged.
func (m *Mirror) rebuildEpochs(ctx context.Context) error {
	files, err := datadir.MirrorFiles(m.dir)
	if err != nil {
		return fmt.Errorf("mirror: rebuild %s: %w", m.ej.path, err)
	}
	wm := m.Watermark()
	epochs := map[string]uint64{}
	errDone := errors.New("done")
	for _, f := range files {
		var epoch uint64
		_, _, err := m.bus.ValidPacks(ctx, f.RolloutID, func(p *stream.Packed) error {
			if p.Seq > wm {
				return errDone
			}
			epoch = p.Epoch
			return nil
		})
		if err != nil && !errors.Is(err, errDone) {
			return fmt.Errorf("mirror: rebuild %s: %w", m.ej.path, err)
		}
		if epoch > 0 {
			epochs[f.RolloutID] = epoch
		}
	}
	for id, e := range epochs {
		r := m.rollout(id)
		r.mu.Lock()
		r.epoch = max(r.epoch, e)
		e = r.epoch
		r.mu.Unlock()
		epochs[id] = e
	}
	if err := m.ej.write(epochs, wm); err != nil {
		return err
	}
	m.log.Info("mirror: epoch journal rebuilt from the bus", "file", m.ej.path, "rollouts", len(files), "watermark", wm)
	return nil
}
