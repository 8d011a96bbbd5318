package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/logbook-agents/logbook/internal/datadir"
	"github.com/logbook-agents/logbook/internal/index"
	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
	"github.com/logbook-agents/logbook/internal/stream/mirror"
)

// verify --data DIR: the index against the mirror, every mirror file, and
// the mirror against JetStream (verifyMirrorAgainstBus).

// busCheck is the mirror-against-JetStream half of verify --data.
type busCheck struct {
	Checked  bool     `json:"checked"`
	Note     string   `json:"note,omitempty"`
	Rollouts int      `json:"rollouts"`
	Records  int64    `json:"records"` // mirrored records found byte-equal on the bus
	Behind   int      `json:"behind"`  // mirror files behind the bus: allowed
	Problems []string `json:"problems"`
}

// verifyMirrorAgainstBus compares every mirror file of dir with the ROLLOUTS
// stream, byte for byte, through the bus named in dir/nats.url
// (mirror.VerifyBus). A bus that cannot be reached, or a read that fails,
// leaves the check not run: the note says why, and verify fails.
func verifyMirrorAgainstBus(ctx context.Context, dir string) (busCheck, error) {
	bc := busCheck{Problems: []string{}}
	bus, closeBus, note := openDataBus(ctx, dir)
	if bus == nil {
		bc.Note = note
		return bc, nil
	}
	defer closeBus()
	rep, err := mirror.VerifyBus(ctx, bus, dir)
	if err != nil {
		bc.Note = fmt.Sprintf("not checked: reading the bus failed: %v", err)
		return bc, nil
	}
	bc.Checked, bc.Rollouts, bc.Records, bc.Behind, bc.Problems = true, rep.Rollouts, rep.Records, len(rep.Behind), rep.Problems
	return bc, nil
}

// openDataBus connects to the bus that serves dir, as dir/nats.url names it.
func openDataBus(ctx context.Context, dir string) (*stream.Bus, func(), string) {
	b, err := os.ReadFile(datadir.URLPath(dir))
	if err != nil {
		return nil, nil, fmt.Sprintf("not checked: %s has no %s (no coordinator is serving it)", dir, datadir.NATSURL)
	}
	url := strings.TrimSpace(string(b))
	opts, err := dialOptions(stream.Credentials{}, dir)
	if err != nil {
		return nil, nil, fmt.Sprintf("not checked: %v", err)
	}
	nc, err := stream.Dial(url, "logbook-verify", slog.New(slog.DiscardHandler), opts...)
	if err != nil {
		return nil, nil, fmt.Sprintf("not checked: the bus at %s is not reachable (%v); is a coordinator serving %s?", url, err, dir)
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	bus, err := stream.Open(octx, nc, stream.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Sprintf("not checked: the bus at %s: %v", url, err)
	}
	return bus, nc.Close, ""
}

// indexCheck is the index-against-mirror half.
type indexCheck struct {
	Checked  bool                 `json:"checked"`
	Note     string               `json:"note,omitempty"`
	Rollouts int                  `json:"rollouts"`
	Lagging  []string             `json:"lagging"` // behind the mirror: allowed
	Problems []index.IndexProblem `json:"problems"`
}

type verifyDataJSON struct {
	DataDir string       `json:"data_dir"`
	OK      bool         `json:"ok"`
	Index   indexCheck   `json:"index"`
	Files   []verifyJSON `json:"files"`
	Bus     busCheck     `json:"bus"`
}

func runVerifyData(ctx context.Context, w io.Writer, fl verifyFlags) error {
	dir, err := resolveDataDir(fl.data)
	if err != nil {
		return err
	}
	// The index first: mirror files only grow after it, so a file found
	// shorter than a watermark means the index leads.
	ic := indexCheck{Lagging: []string{}, Problems: []index.IndexProblem{}}
	rep, err := index.VerifyIndex(ctx, dir)
	switch {
	case errors.Is(err, index.ErrNoIndex):
		ic.Note = "no index yet (coordinator reindex builds it)"
	case err != nil:
		return err
	default:
		ic.Checked, ic.Rollouts, ic.Problems = true, len(rep.Rollouts), rep.Problems
		// The lineage and the ledger the index answers tree and unconfirmed
		// from, against the full scan of the same records.
		lp, err := index.VerifyLineage(ctx, dir)
		if err != nil {
			return err
		}
		ic.Problems = append(ic.Problems, lp...)
	}
	files, err := datadir.MirrorFiles(dir)
	if err != nil {
		return err
	}
	checks := make([]fileCheck, 0, len(files))
	badFiles := 0
	ends := map[string]int64{}
	for _, f := range files {
		c := checkFile(f.Path, rollout.VerifyOptions{RequireCRC: fl.requireCRC})
		if _, err := os.Stat(f.Path); c.err != nil && errors.Is(err, fs.ErrNotExist) {
			// Compressed or re-materialized by a serving mirror meanwhile.
			if p := datadir.MirrorPath(dir, f.RolloutID); p != "" {
				c = checkFile(p, rollout.VerifyOptions{RequireCRC: fl.requireCRC})
			}
		}
		if !c.ok() {
			badFiles++
		}
		ends[f.RolloutID] = c.rep.End
		checks = append(checks, c)
	}
	indexed := map[string]bool{}
	for _, ro := range rep.Rollouts {
		indexed[ro.ID] = true
		if end, ok := ends[ro.ID]; ok && end > ro.WatermarkOffset {
			ic.Lagging = append(ic.Lagging, ro.ID)
		}
	}
	for _, f := range files {
		if ic.Checked && !indexed[f.RolloutID] {
			ic.Lagging = append(ic.Lagging, f.RolloutID)
		}
	}
	bus, err := verifyMirrorAgainstBus(ctx, dir)
	if err != nil {
		return err
	}
	bad := len(ic.Problems) + badFiles + len(bus.Problems)
	if !bus.Checked {
		bad++ // a check that could not run is a failure, never a pass with a note
	}
	if fl.json {
		out := verifyDataJSON{DataDir: dir, OK: bad == 0, Index: ic, Files: []verifyJSON{}, Bus: bus}
		for i := range checks {
			out.Files = append(out.Files, verifyJSONOf(&checks[i]))
		}
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		var buf bytes.Buffer
		writeVerifyData(&buf, dir, ic, checks, badFiles, bus)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("verify: %s: %s (listed on stdout)", dir, plural(bad, "problem", "problems"))
	}
	return nil
}

func writeVerifyData(w io.Writer, dir string, ic indexCheck, checks []fileCheck, badFiles int, bus busCheck) {
	fmt.Fprintf(w, "Data dir %s\n\n", dir)
	switch {
	case !ic.Checked:
		fmt.Fprintf(w, "Index against mirror: %s\n", ic.Note)
	default:
		status := "ok"
		if len(ic.Problems) > 0 {
			status = plural(len(ic.Problems), "problem", "problems")
		}
		fmt.Fprintf(w, "Index against mirror: %s: %s indexed, %s behind the mirror (the index may lag, never lead)\n",
			status, plural(ic.Rollouts, "rollout", "rollouts"), num(int64(len(ic.Lagging))))
		for _, p := range ic.Problems {
			loc := "index"
			if p.Rollout != "" {
				loc += ": rollout " + p.Rollout
			}
			fmt.Fprintf(w, "  %s: %s: %s\n", loc, p.Kind, oneLine(p.Detail))
		}
		differ := 0
		for _, p := range ic.Problems {
			if p.Kind == "lineage_differs" || p.Kind == "ledger_differs" {
				differ++
			}
		}
		status = "ok: tree and unconfirmed from the index equal a full scan of the same records"
		if differ > 0 {
			status = plural(differ, "problem", "problems") + " (listed above)"
		}
		fmt.Fprintf(w, "Index lineage and ledger against a full scan: %s\n", status)
	}
	fmt.Fprintf(w, "\nMirror files: %s, %d ok, %d with problems\n", plural(len(checks), "file", "files"), len(checks)-badFiles, badFiles)
	for i := range checks {
		if !checks[i].ok() {
			writeFileCheck(w, &checks[i])
		}
	}
	fmt.Fprintf(w, "\nMirror against JetStream: ")
	switch {
	case !bus.Checked:
		fmt.Fprintln(w, bus.Note)
	case len(bus.Problems) == 0:
		fmt.Fprintf(w, "ok: %s, %s byte-equal, %s behind the bus (the mirror may lag, never lead)\n",
			plural(bus.Rollouts, "rollout", "rollouts"), plural(int(bus.Records), "record", "records"), num(int64(bus.Behind)))
	default:
		fmt.Fprintln(w, plural(len(bus.Problems), "problem", "problems"))
		for _, p := range bus.Problems {
			fmt.Fprintf(w, "  %s\n", oneLine(p))
		}
	}
}
