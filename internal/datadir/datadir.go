package datadir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// Names inside a data dir. They are the on-disk contract between the
// coordinator's parts and between its versions: do not change them.
const (
	Lock        = "LOCK"
	NATSURL     = "nats.url"
	HTTPURL     = "http.url"
	NATSKey     = "nats.nk"  // a serving coordinator's local operator nkey seed (with --auth), 0600
	NATSTLS     = "nats.tls" // the TLS files of an embedded server with --tls-cert (JSON), for local commands
	NATSStore   = "nats"
	Rollouts    = "rollouts"
	MirrorState = "mirror.state"
	// MirrorEpochs is the mirror's epoch journal: each rollout's highest
	// accepted epoch, crc-checked entries.
	MirrorEpochs = "mirror.epochs"
	Quarantine   = "quarantine"
	Damaged      = "damaged" // under Quarantine
	Index        = "index.db"
	// JSONLExt is a plain mirror file's extension; a compressed one adds
	// ZstExt.
	JSONLExt = ".jsonl"
	ZstExt   = rollout.ZstExt
)

// RolloutsDir is dir's mirror directory.
func RolloutsDir(dir string) string { return filepath.Join(dir, Rollouts) }

// QuarantineDir is dir's quarantine directory.
func QuarantineDir(dir string) string { return filepath.Join(dir, Quarantine) }

// IndexPath is dir's index database.
func IndexPath(dir string) string { return filepath.Join(dir, Index) }

// URLPath is the file that holds the serving coordinator's NATS URL.
func URLPath(dir string) string { return filepath.Join(dir, NATSURL) }

// HTTPURLPath is the file that holds the serving coordinator's HTTP URL
// (the address it bound, port 0 resolved).
func HTTPURLPath(dir string) string { return filepath.Join(dir, HTTPURL) }

// KeyPath is the file that holds the serving coordinator's local operator
// nkey seed: commands run through the data dir use it when given no
// credentials.
func KeyPath(dir string) string { return filepath.Join(dir, NATSKey) }

// TLSPath is the file naming the TLS files of a serving coordinator's
// embedded server (with --tls-cert): commands run through the data dir
// trust its certificate and, with mutual TLS, present it.
func TLSPath(dir string) string { return filepath.Join(dir, NATSTLS) }

// PlainPath is the uncompressed mirror file of a rollout (which may not
// exist).
func PlainPath(dir, rolloutID string) string {
	return filepath.Join(dir, Rollouts, rolloutID+JSONLExt)
}

// MirrorPath returns the mirror file of a rollout, plain or compressed
// ("" when there is none). The plain file wins when both exist.
func MirrorPath(dir, rolloutID string) string {
	base := PlainPath(dir, rolloutID)
	for _, p := range []string{base, base + ZstExt} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// RolloutID returns the rollout id a mirror file name stands for, and
// whether the name is a mirror file's at all (<valid id>.jsonl or
// <valid id>.jsonl.zst).
func RolloutID(name string) (id string, zst bool, ok bool) {
	if id, ok = strings.CutSuffix(name, JSONLExt); !ok {
		if id, ok = strings.CutSuffix(name, JSONLExt+ZstExt); !ok {
			return "", false, false
		}
		zst = true
	}
	if rollout.ValidateID("rollout_id", id) != nil {
		return "", false, false
	}
	return id, zst, true
}

// MirrorFile is one rollout file of a data dir's mirror.
type MirrorFile struct {
	RolloutID string
	Path      string
	Size      int64 // on disk (compressed for .jsonl.zst)
}

// MirrorFiles lists dir/rollouts/, one file per rollout id, sorted by id:
// the plain .jsonl when both it and the .jsonl.zst exist (the mirror is
// between a compression and the removal of the original; both hold the
// same lines). Other names and anything not a regular file are ignored; a
// data dir without rollouts/ has none.
func MirrorFiles(dir string) ([]MirrorFile, error) {
	ents, err := os.ReadDir(RolloutsDir(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byID := map[string]MirrorFile{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		id, zst, ok := RolloutID(e.Name())
		if !ok {
			continue
		}
		if prev, seen := byID[id]; seen && (zst || !strings.HasSuffix(prev.Path, ZstExt)) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		byID[id] = MirrorFile{RolloutID: id, Path: filepath.Join(RolloutsDir(dir), e.Name()), Size: info.Size()}
	}
	out := make([]MirrorFile, 0, len(byID))
	for _, f := range byID {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RolloutID < out[j].RolloutID })
	return out, nil
}
