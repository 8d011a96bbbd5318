package mirror

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// recoverFiles repairs what a crash can leave in rollouts/: temp files
// (removed: the step they belonged to never completed), and a rollout held
// both as .jsonl and .jsonl.zst (a crash between a rename and the removal
// that follows it). Both then hold the same lines, one possibly more (a
// torn or lost tail): the one that holds the other whole is kept; if
// neither does, the .jsonl is kept and the .jsonl.zst set aside as
// .jsonl.zst.conflict.
func (m *Mirror) recoverFiles(ctx context.Context) error {
	ents, err := os.ReadDir(m.rdir)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	changed := false
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			m.log.Info("mirror: removing a temp file left by a crash", "file", name)
			if err := os.Remove(filepath.Join(m.rdir, name)); err != nil {
				return fmt.Errorf("mirror: %w", err)
			}
			changed = true
			continue
		}
		id, ok := strings.CutSuffix(name, datadir.JSONLExt+zstExt)
		if !ok || rollout.ValidateID("rollout id", id) != nil {
			continue
		}
		if plain, err := isFile(m.plainPath(id)); err != nil || !plain {
			continue
		}
		if err := m.resolveBoth(id); err != nil {
			return err
		}
		changed = true
	}
	if tmp := filepath.Join(m.dir, "."+datadir.MirrorState+".tmp"); fileExists(tmp) {
		os.Remove(tmp)
	}
	if changed {
		return syncDir(m.rdir)
	}
	return nil
}

// resolveBoth keeps one of a rollout's .jsonl and .jsonl.zst.
func (m *Mirror) resolveBoth(id string) error {
	plain, zpath := m.plainPath(id), m.zstPath(id)
	rel, err := compareWithZst(plain, zpath)
	if err != nil {
		return fmt.Errorf("mirror: rollout %s: %w", id, err)
	}
	switch rel {
	case plainHolds, zstUnreadable:
		m.log.Info("mirror: rollout found both plain and compressed; keeping the plain file", "rollout", id, "why", rel)
		return os.Remove(zpath)
	case zstHolds:
		m.log.Warn("mirror: rollout found both plain and compressed, the plain file shorter; keeping the compressed file", "rollout", id)
		return os.Remove(plain)
	default:
		conflict, err := freeName(zpath + ".conflict")
		if err != nil {
			return err
		}
		m.log.Error("mirror: rollout's plain and compressed files differ; keeping the plain file", "rollout", id, "compressed_kept_as", conflict)
		return os.Rename(zpath, conflict)
	}
}

type relation string

const (
	plainHolds    relation = "the plain file holds all the compressed one does"
	zstHolds      relation = "the compressed file holds all the plain one does, and more"
	zstUnreadable relation = "the compressed file is unreadable"
	differ        relation = "they differ"
)

// compareWithZst compares the bytes of a plain file and a compressed one.
func compareWithZst(plain, zpath string) (relation, error) {
	p, err := os.Open(plain)
	if err != nil {
		return "", err
	}
	defer p.Close()
	z, err := os.Open(zpath)
	if err != nil {
		return "", err
	}
	defer z.Close()
	dec, err := zstd.NewReader(z, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return zstUnreadable, nil
	}
	defer dec.Close()
	a := make([]byte, 256<<10)
	b := make([]byte, 256<<10)
	for {
		n, errP := io.ReadFull(p, a)
		k, errZ := io.ReadFull(dec, b[:n])
		if errZ != nil && errZ != io.EOF && errZ != io.ErrUnexpectedEOF {
			return zstUnreadable, nil
		}
		if errP != nil && errP != io.EOF && errP != io.ErrUnexpectedEOF {
			return "", errP
		}
		if string(a[:k]) != string(b[:k]) {
			return differ, nil
		}
		if k < n {
			return plainHolds, nil // the compressed content ended first
		}
		if n < len(a) {
			// The plain file ended: does the compressed one go on?
			var one [1]byte
			if k, _ := io.ReadFull(dec, one[:]); k > 0 {
				return zstHolds, nil
			}
			return plainHolds, nil
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
