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

	"github.com/logbook-agents/logbook/internal/datadir"
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

// VerifyBus compares every mirror file of data dir dir with the records
// the bus accepts by the valid-tail rule (stream.Bus.ValidPacks, no
// consumer): every mirrored record must be the accepted record with the
// same ordinal, byte for byte, and no mirror file may hold a record the
// bus does not accept. A mirror file behind the bus is not a problem.
// Damage in the mirror file itself is skipped (the per-file check reports
// it). A serving coordinator may append
// meanwhile: each file is read before its rollout is read from the bus.
func VerifyBus(ctx context.Context, bus *stream.Bus, dir string) (BusReport, error) {
	rep := BusReport{Behind: []string{}, Problems: []string{}}
	files, err := datadir.MirrorFiles(dir)
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
func verifyRollout(ctx context.Context, bus *stream.Bus, dir string, f datadir.MirrorFile) (equal int64, behind bool, probs []string, err error) {
	data, err := readMirror(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		// Compressed or re-materialized meanwhile: read whichever is there.
		if p := datadir.MirrorPath(dir, f.RolloutID); p != "" {
			data, err = readMirror(p)
		}
	}
	if err != nil {
		return 0, false, []string{fmt.Sprintf("rollout %s: cannot read %s: %v", f.RolloutID, f.Path, err)}, nil
	}
	// What the bus accepts by the rule the mirror and the writers apply.
	type accepted struct {
		line []byte
		seq  uint64
	}
	var onBus []accepted // onBus[k] is ordinal k+1
	if _, _, err := bus.ValidPacks(ctx, f.RolloutID, func(p *stream.Packed) error {
		for _, l := range p.Lines {
			onBus = append(onBus, accepted{l, p.Seq})
		}
		return nil
	}); err != nil {
		return 0, false, nil, fmt.Errorf("mirror: verify rollout %s: %w", f.RolloutID, err)
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
		switch {
		case ord > int64(len(onBus)):
			add("ordinal %d is in the mirror file, the bus accepts only %d records (the mirror accepted what the bus's valid tail does not)", ord, len(onBus))
		case !bytes.Equal(onBus[ord-1].line, me.Record.Raw):
			add("ordinal %d differs from the record the bus accepts (seq %d)", ord, onBus[ord-1].seq)
		default:
			equal++
		}
	}
	return equal, last < int64(len(onBus)), probs, nil
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
