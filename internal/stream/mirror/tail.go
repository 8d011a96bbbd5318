package mirror

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	"github.com/logbook-agents/logbook/internal/rollout"
)

const zstExt = rollout.ZstExt

// errDamaged wraps what makes a mirror file unusable for appends: damage at
// its tail that is not a torn write.
var errDamaged = errors.New("mirror file damaged")

// load finds what r's mirror file holds: which file, and the next ordinal.
// A torn tail is repaired on the way (a compressed file is re-materialized
// first). r.mu is held.
func (m *Mirror) load(r *ro) error {
	if r.known {
		return nil
	}
	r.broken = ""
	for {
		plain, err := isFile(m.plainPath(r.id))
		if err != nil {
			return err
		}
		zst := false
		if !plain {
			if zst, err = isFile(m.zstPath(r.id)); err != nil {
				return err
			}
		}
		if !plain && !zst {
			for _, path := range []string{m.plainPath(r.id), m.zstPath(r.id)} {
				if odd, err := notFile(path); err != nil {
					return fmt.Errorf("mirror: rollout %s: %w", r.id, err)
				} else if odd {
					if err := m.setAside(r, path, "not a regular file"); err != nil {
						return err
					}
				}
			}
			r.next, r.zst, r.known = 1, false, true
			return nil
		}
		r.zst = zst
		path := m.plainPath(r.id)
		if zst {
			path = m.zstPath(r.id)
		}
		e, err := lastEntry(path)
		var ce *rollout.CorruptionError
		switch {
		case errors.Is(err, io.EOF):
			r.next, r.known = 1, true
			return nil
		case errors.As(err, &ce) && ce.Torn():
			if zst {
				if err := m.rematerialize(r); err != nil {
					if ioError(err) {
						return err
					}
					return m.setAside(r, path, err.Error())
				}
				continue
			}
			if err := m.repairTorn(r.id, path, ce.Offset); err != nil {
				return err
			}
			continue
		case errors.As(err, &ce):
			return m.setAside(r, path, "damaged at its tail: "+ce.Error())
		case err != nil && ioError(err):
			return fmt.Errorf("mirror: rollout %s: %w", r.id, err)
		case err != nil:
			// A file that cannot be read (a truncated .jsonl.zst).
			return m.setAside(r, path, err.Error())
		}
		if e.Record.Ordinal < 1 {
			return m.setAside(r, path, "its last record has no ordinal: not a mirror file")
		}
		r.next, r.known = e.Record.Ordinal+1, true
		return nil
	}
}

// lastEntry reads the last line of a rollout file.
func lastEntry(path string) (rollout.Entry, error) {
	f, err := rollout.OpenFile(path)
	if err != nil {
		return rollout.Entry{}, err
	}
	cur, err := f.Backward()
	if err != nil {
		return rollout.Entry{}, err
	}
	defer cur.Close()
	return cur.Next()
}

func isFile(path string) (bool, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.Mode().IsRegular(), nil
}

// repairTorn moves the bytes from off to the end of a plain mirror file (a
// write cut short) into <file>.broken and truncates the file there: copy
// to a temp file, fsync, rename, fsync, then truncate, fsync.
func (m *Mirror) repairTorn(id, path string, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	torn := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(torn, off); err != nil {
		return fmt.Errorf("mirror: rollout %s: read torn tail: %w", id, err)
	}
	broken, err := freeName(path + ".broken")
	if err != nil {
		return err
	}
	// Temp file, fsync, rename: a failed repair (a full disk) leaves no
	// empty or partial .broken file behind.
	if err := writeAtomic(m.cfg.FS, broken, torn); err != nil {
		return fmt.Errorf("mirror: rollout %s: keep torn tail in %s: %w", id, broken, err)
	}
	if err := f.Truncate(off); err != nil {
		return fmt.Errorf("mirror: rollout %s: truncate torn tail: %w", id, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("mirror: rollout %s: %w", id, err)
	}
	m.log.Warn("mirror: torn tail repaired", "rollout", id, "offset", off, "bytes", len(torn), "kept", broken)
	m.count(func(s *Status) { s.TornRepaired++ })
	return nil
}

// freeName returns base, or base.2, base.3 ... the first that does not exist.
func freeName(base string) (string, error) {
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = base + "." + strconv.Itoa(i)
		}
		_, err := os.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
	}
}

// mirrored returns the lines (without '\n') of ordinals from..to of r's
// mirror file, read backward from its end. Damage on the way wraps
// errDamaged.
func (m *Mirror) mirrored(r *ro, from, to int64) ([][]byte, error) {
	path := m.plainPath(r.id)
	if r.zst {
		path = m.zstPath(r.id)
	}
	f, err := rollout.OpenFile(path)
	if err != nil {
		return nil, err
	}
	cur, err := f.Backward()
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	out := make([][]byte, to-from+1)
	for {
		e, err := cur.Next()
		var ce *rollout.CorruptionError
		switch {
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%w: %s: ordinal %d not found", errDamaged, path, from)
		case errors.As(err, &ce):
			return nil, fmt.Errorf("%w: %v", errDamaged, ce)
		case err != nil:
			return nil, err
		}
		ord := e.Record.Ordinal
		if ord < from {
			return nil, fmt.Errorf("%w: %s: ordinal %d not found", errDamaged, path, from)
		}
		if ord <= to {
			out[ord-from] = e.Record.Raw
			if ord == from {
				return out, nil
			}
		}
	}
}
