package mirror

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"

	"github.com/nats-io/nats.go"
)

// Kinds of refusal: the kind field of <seq>.json. Part of the quarantine
// format: do not change, add to it.
const (
	KindBadPack         = "bad_pack"         // not a pack: headers, msg id, payload framing
	KindInvalidID       = "invalid_id"       // the subject's rollout id, or an ID in a record
	KindCRCMismatch     = "crc_mismatch"     // the pack's Logbook-CRC or a record's crc
	KindBadRecord       = "bad_record"       // a line that is not a valid record, or not the ordinal its place says
	KindWrongRollout    = "wrong_rollout"    // the canonical session_meta names another rollout than the subject
	KindOrdinalGap      = "ordinal_gap"      // starts after the ordinal the mirror file expects next
	KindOrdinalConflict = "ordinal_conflict" // repeats mirrored ordinals with other bytes
	KindStaleEpoch      = "stale_epoch"      // epoch lower than the rollout's highest accepted epoch
	KindFutureEpoch     = "future_epoch"     // epoch higher than any lease revision issued
	KindTooLarge        = "too_large"        // a record over the record limit writers enforce (stream.Bus.CheckRecordSizes)
	KindMirrorDamaged   = "mirror_damaged"   // the mirror file's tail is damaged (not torn): nothing is appended to it
)

// Quarantined is the <seq>.json written beside a refused message's
// <seq>.msg (its payload, byte for byte).
type Quarantined struct {
	Seq     uint64              `json:"seq"`
	Subject string              `json:"subject"`
	Kind    string              `json:"kind"`
	Reason  string              `json:"reason"`
	Headers map[string][]string `json:"headers"`
	Size    int                 `json:"size"`
	Time    time.Time           `json:"time"`
}

// refusal is why a message was not mirrored.
type refusal struct {
	kind   string
	reason string
}

func refuse(kind, format string, a ...any) *refusal {
	return &refusal{kind: kind, reason: fmt.Sprintf(format, a...)}
}

// quarantine writes a refused message into the quarantine directory. The
// files are returned open, written, for the batch to fsync with its others;
// again says the message was quarantined before (a batch redone after a
// crash).
func (m *Mirror) quarantine(seq uint64, subject string, h nats.Header, data []byte, r *refusal) (files []*os.File, again bool, err error) {
	base := filepath.Join(m.qdir, strconv.FormatUint(seq, 10))
	again = fileExists(base + ".json")
	q := Quarantined{Seq: seq, Subject: subject, Kind: r.kind, Reason: r.reason, Headers: h, Size: len(data), Time: time.Now().UTC()}
	if q.Headers == nil {
		q.Headers = map[string][]string{}
	}
	meta, err := json.MarshalIndent(q, "", "  ")
	if err != nil {
		return nil, again, err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{base + ".msg", data}, {base + ".json", append(meta, '\n')}} {
		fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err == nil {
			_, err = fh.Write(f.data)
			if err != nil {
				fh.Close()
			}
		}
		if err != nil {
			for _, o := range files {
				o.Close()
			}
			return nil, again, fmt.Errorf("mirror: quarantine seq %d: %w", seq, err)
		}
		files = append(files, fh)
	}
	m.log.Warn("mirror: message quarantined", "seq", seq, "subject", clipSubject(subject), "kind", r.kind, "reason", r.reason)
	return files, again, nil
}

// countQuarantine counts the refused messages already in the directory.
func countQuarantine(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	return n, nil
}

// ReadQuarantine lists the refused messages of a data dir, by sequence.
func ReadQuarantine(dataDir string) ([]Quarantined, error) {
	dir := datadir.QuarantineDir(dataDir)
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Quarantined
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var q Quarantined
		if err := json.Unmarshal(b, &q); err != nil {
			return nil, fmt.Errorf("mirror: %s: %w", e.Name(), err)
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b Quarantined) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// clipSubject keeps log lines short whatever a publisher sent.
func clipSubject(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}
