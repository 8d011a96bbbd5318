package mirror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/rollout"
)

// The watermark file holds two slots, slotSize bytes apart, each a line
//
//	<crc> <json>\n
//
// where crc is the CRC-32C of the JSON bytes (rollout.Checksum). A write
// goes to the slot the current state is not in (gen % 2) and is fdatasynced;
// a reader takes the valid slot with the higher gen. A write torn by a
// crash damages only its own slot: the other still holds the previous
// watermark. The slots are a device sector or more apart so that one write
// cannot tear the other. Part of the data dir format: do not change, add
// fields to the JSON.
const (
	slotSize  = 4096
	stateSize = 2 * slotSize
)

// state is the JSON of a slot.
type state struct {
	Version int `json:"version"`
	// Gen counts the writes; the slot is gen % 2.
	Gen uint64 `json:"gen"`
	// Seq is the last stream sequence of ROLLOUTS fully mirrored: every
	// message up to it is in a mirror file (fsynced) or in quarantine/.
	Seq uint64 `json:"seq"`
	// StreamCreated is the creation time of the stream the sequences belong
	// to: a stream created anew (its store lost) restarts its sequences.
	StreamCreated time.Time `json:"stream_created,omitzero"`
	Updated       time.Time `json:"updated"`
}

const stateVersion = 1

func encodeSlot(s state) ([]byte, error) {
	js, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	line := append([]byte(rollout.Checksum(js)+" "), js...)
	if len(line)+1 > slotSize {
		return nil, fmt.Errorf("mirror: watermark slot of %d bytes", len(line)+1)
	}
	return append(line, '\n'), nil
}

// decodeSlot reads one slot; ok is false for an empty or damaged one.
func decodeSlot(b []byte) (s state, ok bool) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 10 || b[8] != ' ' {
		return s, false
	}
	js := b[9:nl]
	if rollout.Checksum(js) != string(b[:8]) || json.Unmarshal(js, &s) != nil {
		return s, false
	}
	return s, true
}

// stateFile is the open watermark file.
type stateFile struct {
	f   *os.File
	cur state
}

// openState opens (creating it) the watermark of a data dir. A new file is
// written whole (both slots at sequence 0) by temp file and rename.
func openState(dir string) (*stateFile, error) {
	path := filepath.Join(dir, datadir.MirrorState)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createState(path); err != nil {
			return nil, fmt.Errorf("mirror: create %s: %w", path, err)
		}
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	buf := make([]byte, stateSize)
	n, err := f.ReadAt(buf, 0)
	if err != nil && n < stateSize {
		buf = buf[:n]
	}
	var best state
	found := false
	for off := 0; off < len(buf); off += slotSize {
		s, ok := decodeSlot(buf[off:min(off+slotSize, len(buf))])
		if ok && (!found || s.Gen > best.Gen) {
			best, found = s, true
		}
	}
	if !found {
		f.Close()
		return nil, fmt.Errorf("%w: %s: no valid slot (remove it to mirror the bus again from the start)", ErrState, path)
	}
	if best.Version != stateVersion {
		f.Close()
		return nil, fmt.Errorf("%w: %s has version %d, this mirror writes %d", ErrState, path, best.Version, stateVersion)
	}
	return &stateFile{f: f, cur: best}, nil
}

func createState(path string) error {
	buf := make([]byte, stateSize)
	s := state{Version: stateVersion, Updated: time.Now().UTC()}
	for slot := range 2 {
		s.Gen = uint64(slot)
		line, err := encodeSlot(s)
		if err != nil {
			return err
		}
		copy(buf[slot*slotSize:], line)
	}
	return writeAtomic(&osFS{}, path, buf)
}

// write makes s the watermark: its slot written and fdatasynced.
func (sf *stateFile) write(s state) error {
	s.Version = stateVersion
	s.Gen = sf.cur.Gen + 1
	s.Updated = time.Now().UTC()
	line, err := encodeSlot(s)
	if err != nil {
		return err
	}
	if _, err := sf.f.WriteAt(line, int64(s.Gen%2)*slotSize); err != nil {
		return fmt.Errorf("mirror: write watermark: %w", err)
	}
	if err := datasync(sf.f); err != nil {
		return fmt.Errorf("mirror: fsync watermark: %w", err)
	}
	sf.cur = s
	return nil
}

func (sf *stateFile) close() error { return sf.f.Close() }
