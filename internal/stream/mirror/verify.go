package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// BusReport is what VerifyBus found.
type BusReport struct {
	Rollouts int   `json:"rollouts"` // mirror files compared
	Records  int64 `json:"records"`  // mirrored records found byte-equal on the bus
	// Behind lists rollouts whose mirror file holds fewer records than the
	// bus: allowed, the mirror may lag.
	Behind   []string `json:"behind"`
	Problems []string `json:"problems"`
}

// maxProblemsPerRollout bounds what one rollout adds to a report.
const maxProblemsPerRollout = 5

// VerifyBus compares every mirror file of data dir dir with ROLLOUTS, read
// through the bus reader (stream.Bus.ReadRollout): every mirrored record
// must be on the bus with the same ordinal and the same bytes, and no
// mirror file may hold a record the bus does not. A mirror file behind the
// bus is not a problem. Damage the reader reports on the bus (what the
// mirror quarantines) is skipped, and so is damage in the mirror file
// itself (the per-file check reports it). A serving coordinator may append
// meanwhile: each file is read before its rollout is read from the bus.
func VerifyBus(ctx context.Context, bus *stream.Bus, dir string) (BusReport, error) {
	rep := BusReport{Behind: []string{}, Problems: []string{}}
	files, err := index.MirrorFiles(dir)
	if err != nil {
		return rep, err
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		n, behind, probs, err := verifyRollout(ctx, bus, dir, f)
		if err != nil {
			return rep, err
		}
		rep.Rollouts++
		rep.Records += n
		if behind {
			rep.Behind = append(rep.Behind, f.RolloutID)
		}
		rep.Problems = append(rep.Problems, probs...)
	}
	return rep, nil
}

// verifyRollout compares one mirror file with its rollout on the bus.
func verifyRollout(ctx context.Context, bus *stream.Bus, dir string, f index.MirrorFile) (equal int64, behind bool, probs []string, err error) {
	data, err := readMirror(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		// Compressed or re-materialized meanwhile: read whichever is there.
		if p := index.MirrorPath(dir, f.RolloutID); p != "" {
			data, err = readMirror(p)
		}
	}
	if err != nil {
		return 0, false, []string{fmt.Sprintf("rollout %s: cannot read %s: %v", f.RolloutID, f.Path, err)}, nil
	}
	rd, err := bus.ReadRollout(ctx, f.RolloutID, 1)
	if err != nil {
		return 0, false, nil, err
	}
	defer rd.Close()
	var (
		have    stream.Entry
		hasHave bool
		busEOF  bool
	)
	// busAt advances the bus to the first valid record with an ordinal >= ord.
	busAt := func(ord int64) error {
		for !busEOF && (!hasHave || have.Ordinal < ord) {
			e, err := rd.Next(ctx)
			var pe *stream.PackError
			switch {
			case errors.Is(err, io.EOF):
				busEOF, hasHave = true, false
			case errors.As(err, &pe) && e.Record.Raw == nil:
				// a damaged message or record: the mirror quarantined it
			case err != nil && !errors.As(err, &pe):
				return err
			default:
				have, hasHave = e, true
			}
		}
		return nil
	}
	add := func(format string, a ...any) {
		if len(probs) < maxProblemsPerRollout {
			probs = append(probs, fmt.Sprintf("rollout %s: ", f.RolloutID)+fmt.Sprintf(format, a...))
		} else if len(probs) == maxProblemsPerRollout {
			probs = append(probs, fmt.Sprintf("rollout %s: more differences not listed", f.RolloutID))
		}
	}
	cur, err := rollout.NewMem(f.Path, data).Forward(0)
	if err != nil {
		return 0, false, nil, err
	}
	defer cur.Close()
	var last int64
	for {
		me, err := cur.Next()
		var ce *rollout.CorruptionError
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.As(err, &ce) {
			continue
		}
		if err != nil {
			return equal, false, probs, err
		}
		ord := me.Record.Ordinal
		if ord < 1 {
			add("line %d has no ordinal: not a mirror file", me.Line)
			break
		}
		last = ord
		if err := busAt(ord); err != nil {
			return equal, false, probs, fmt.Errorf("mirror: verify rollout %s: %w", f.RolloutID, err)
		}
		switch {
		case !hasHave:
			add("the mirror file holds ordinal %d, the bus does not (the mirror leads the bus)", ord)
		case have.Ordinal != ord:
			add("the mirror file holds ordinal %d, the bus does not (its next record is ordinal %d, seq %d)", ord, have.Ordinal, have.Seq)
		case !bytes.Equal(have.Record.Raw, me.Record.Raw):
			add("ordinal %d differs from the bus (seq %d)", ord, have.Seq)
		default:
			equal++
		}
	}
	if err := busAt(last + 1); err != nil {
		return equal, false, probs, fmt.Errorf("mirror: verify rollout %s: %w", f.RolloutID, err)
	}
	return equal, hasHave, probs, nil
}

// readMirror reads a mirror file's JSONL, decompressing a .jsonl.zst.
func readMirror(path string) ([]byte, error) {
	if !strings.HasSuffix(path, zstExt) {
		return os.ReadFile(path)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	dec, err := zstd.NewReader(fh, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return io.ReadAll(dec)
}
