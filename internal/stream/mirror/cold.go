package mirror

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/faults"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// tmpPrefix starts the name of every temp file in rollouts/: never a valid
// rollout id, so datadir.MirrorFiles ignores it, and start-up removes it.
const tmpPrefix = ".tmp."

func (m *Mirror) tmpPath(name string) string { return filepath.Join(m.rdir, tmpPrefix+name) }

// rematerialize turns a compressed rollout back into plain JSONL:
// decompress to a temp file, fsync, rename to .jsonl, fsync the directory,
// remove the .jsonl.zst, fsync the directory. r.mu is held.
func (m *Mirror) rematerialize(r *ro) error {
	zpath, plain := m.zstPath(r.id), m.plainPath(r.id)
	tmp := m.tmpPath(r.id + datadir.JSONLExt)
	if err := decompressTo(zpath, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mirror: rollout %s: re-materialize: %w", r.id, err)
	}
	r.repr.Lock()
	defer r.repr.Unlock()
	if err := os.Rename(tmp, plain); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mirror: rollout %s: %w", r.id, err)
	}
	if err := syncDir(m.rdir); err != nil {
		return err
	}
	faults.Point("mirror.unzst-after-rename")
	if err := os.Remove(zpath); err != nil {
		return fmt.Errorf("mirror: rollout %s: %w", r.id, err)
	}
	if err := syncDir(m.rdir); err != nil {
		return err
	}
	r.zst = false
	m.log.Info("mirror: rollout re-materialized", "rollout", r.id)
	m.count(func(s *Status) { s.Rematerialized++ })
	return nil
}

// decompressTo writes the JSONL of a .jsonl.zst into dst and fsyncs it.
func decompressTo(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	dec, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, dec); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// keepPlain re-materializes a rollout that a history_base now names.
func (m *Mirror) keepPlain(id string) error {
	r := m.rollout(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	zst, err := isFile(m.zstPath(id))
	if err != nil || !zst {
		return err
	}
	if plain, err := isFile(m.plainPath(id)); err != nil || plain {
		return err
	}
	r.known = false
	r.zst = true
	return m.rematerialize(r)
}

// referenced reports whether a canonical history_base names the rollout.
func (m *Mirror) referenced(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refs[id]
}

// runCold compresses idle rollouts until ctx ends. It first learns which
// rollouts are referenced (the canonical session_meta of every mirror file)
// and compresses nothing before.
func (m *Mirror) runCold(ctx context.Context) {
	if err := m.scanRefs(ctx); err != nil {
		if ctx.Err() == nil {
			m.log.Error("mirror: reading history_base references failed; nothing will be compressed", "err", err)
		}
		return
	}
	every := min(max(m.cfg.ColdAfter/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.coldPass(ctx)
	}
}

// coldPass compresses every plain rollout idle for ColdAfter that nothing
// references.
func (m *Mirror) coldPass(ctx context.Context) {
	ents, err := os.ReadDir(m.rdir)
	if err != nil {
		m.log.Error("mirror: list rollouts", "err", err)
		return
	}
	now := time.Now()
	for _, e := range ents {
		if ctx.Err() != nil {
			return
		}
		id, ok := strings.CutSuffix(e.Name(), datadir.JSONLExt)
		if !ok || !e.Type().IsRegular() || rollout.ValidateID("rollout id", id) != nil || m.referenced(id) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < m.cfg.ColdAfter {
			continue
		}
		if err := m.compress(id); err != nil {
			m.log.Error("mirror: compress", "rollout", id, "err", err)
		}
	}
}

// compress writes a rollout's .jsonl.zst and removes its .jsonl: temp file,
// fsync, verify (read it back through the seek table and decompressed whole,
// compared with the JSONL), rename, fsync the directory, remove the .jsonl,
// fsync the directory. Appends are not blocked while it compresses: it
// gives up if the rollout changed meanwhile.
func (m *Mirror) compress(id string) error {
	r := m.rollout(id)
	path := m.plainPath(id)
	r.mu.Lock()
	gen := r.gen
	st, err := os.Stat(path)
	if err != nil {
		r.mu.Unlock()
		return nil // gone meanwhile
	}
	size := st.Size()
	last, err := lastEntry(path)
	r.mu.Unlock()
	if err != nil {
		return nil // empty, torn or damaged: left as it is (repaired before the next append)
	}
	tmp := m.tmpPath(id + datadir.JSONLExt + zstExt)
	defer os.Remove(tmp)
	if err := writeZst(path, size, tmp); err != nil {
		return err
	}
	if err := verifyZst(path, size, tmp, last); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, err := os.Stat(path); err != nil || st.Size() != size || r.gen != gen || m.referenced(id) {
		return nil // appended, referenced or removed meanwhile: try again later
	}
	r.repr.Lock()
	defer r.repr.Unlock()
	faults.Point("mirror.zst-before-rename")
	if err := os.Rename(tmp, m.zstPath(id)); err != nil {
		return err
	}
	if err := syncDir(m.rdir); err != nil {
		return err
	}
	faults.Point("mirror.zst-after-rename")
	if err := os.Remove(path); err != nil {
		return err
	}
	if err := syncDir(m.rdir); err != nil {
		return err
	}
	r.zst = true
	m.log.Info("mirror: idle rollout compressed", "rollout", id, "bytes", size)
	m.count(func(s *Status) { s.Compressed++ })
	return nil
}

// writeZst compresses the first size bytes of src into dst and fsyncs it.
func writeZst(src string, size int64, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := rollout.WriteZst(out, io.LimitReader(in, size)); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// verifyZst checks a compressed temp file against the first size bytes of
// the JSONL: its last line read through the seek table (what tail reads
// use) and its whole content decompressed.
func verifyZst(src string, size int64, zpath string, last rollout.Entry) error {
	f, err := rollout.OpenFile(zpath)
	if err != nil {
		return err
	}
	got, err := lastOf(f)
	if err != nil || string(got.Record.Raw) != string(last.Record.Raw) || got.Offset != last.Offset {
		return fmt.Errorf("mirror: %s: compressed file's last line differs from the JSONL's (%v)", src, err)
	}
	zf, err := os.Open(zpath)
	if err != nil {
		return err
	}
	defer zf.Close()
	dec, err := zstd.NewReader(zf, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	same, err := sameBytes(io.LimitReader(in, size), dec)
	if err != nil {
		return fmt.Errorf("mirror: %s: verify compressed file: %w", src, err)
	}
	if !same {
		return fmt.Errorf("mirror: %s: compressed file does not decompress to the JSONL", src)
	}
	return nil
}

func lastOf(f *rollout.File) (rollout.Entry, error) {
	cur, err := f.Backward()
	if err != nil {
		return rollout.Entry{}, err
	}
	defer cur.Close()
	return cur.Next()
}

// scanRefs reads the canonical session_meta (the first line) of every
// mirror file and notes the rollouts their history_base names.
func (m *Mirror) scanRefs(ctx context.Context) error {
	files, err := datadir.MirrorFiles(m.dir)
	if err != nil {
		return err
	}
	var refs []string
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		ref, err := historyBase(f.Path)
		if err != nil {
			m.log.Warn("mirror: cannot read a rollout's session_meta", "path", f.Path, "err", err)
			continue
		}
		if ref != "" {
			refs = append(refs, ref)
		}
	}
	sort.Strings(refs)
	m.mu.Lock()
	for _, id := range refs {
		m.refs[id] = true
	}
	m.mu.Unlock()
	return nil
}

// historyBase returns the rollout the first record of a mirror file names
// in history_base, if that record is a session_meta with one.
func historyBase(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	var r io.Reader = fh
	if strings.HasSuffix(path, zstExt) {
		dec, err := zstd.NewReader(fh, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return "", err
		}
		defer dec.Close()
		r = dec
	}
	line, err := bufio.NewReaderSize(r, 64<<10).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return "", nil
	}
	rec, err := rollout.DecodeLine(line[:len(line)-1])
	if err != nil || rec.Type != rollout.TypeSessionMeta {
		return "", nil
	}
	meta, err := rollout.Decode[rollout.SessionMeta](&rec)
	if err != nil || meta.HistoryBase == nil {
		return "", nil
	}
	return meta.HistoryBase.RolloutID, nil
}
