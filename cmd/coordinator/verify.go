package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/rollout"
)

type verifyFlags struct {
	json, requireCRC bool
	data             string // a data dir: verify --data mode (verify_data.go)
}

func newVerifyCmd() *cobra.Command {
	var fl verifyFlags
	cmd := &cobra.Command{
		Use:   "verify FILE... | verify --data DIR",
		Short: "Check rollout files, or a data dir's mirror and index, for damage",
		Long: `Verify reads each rollout file (.jsonl or .jsonl.zst) once, from the head,
and lists every problem with its file, line, byte offset (in the uncompressed
JSONL), ordinal and kind:

  torn_tail          the last line is unterminated or unparsable: a write cut short
  corrupt_line       an unparsable line with lines after it
  crc_mismatch       a payload that does not match its crc
  ordinal_gap        ordinals jump forward (or do not start at 1): records are missing
  ordinal_duplicate  an ordinal not above the one before it
  missing_ordinal    a line without an ordinal in a rollout that has them
  missing_crc        a record without a crc (only with --require-crc)
  no_session_meta    no session_meta record: not a rollout, or its head was lost

A damaged line loses its ordinal, so it is usually followed by an
ordinal_gap at the next intact record.

Each file gets a summary: records, ordinal range, schema version (v1, or
version 0 for Codex rollouts, which have neither ordinals nor crcs), and
whether it is compressed.

With --data DIR, verify checks a data dir instead (served by a coordinator
or not; it only reads): the index against the mirror (every indexed
rollout's watermark is within its mirror file, and the index's rows equal a
fresh projection of the mirror up to the watermarks), every mirror file as
above, and the mirror against JetStream where that check is available. An
index that lags the mirror is not a problem; one that leads it is.

Exit status: 0 when every file is clean, 1 when any file has a problem or
cannot be read (or, with --data, when the index differs from the mirror),
2 for a usage error.`,
		Example: `  coordinator verify testdata/examples/*.jsonl
  coordinator verify --json cold/rollout-A.jsonl.zst
  coordinator verify --require-crc ~/.codex/sessions/2026/02/23/*.jsonl  # exit 1: Codex writes no crc
  coordinator verify --data ~/.logbook`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("data") {
				if len(args) > 0 {
					return fmt.Errorf("verify --data checks a data dir and takes no FILE, got %d", len(args))
				}
				return nil
			}
			return someFiles(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("data") {
				return runVerifyData(cmd.Context(), cmd.OutOrStdout(), fl)
			}
			return runVerify(cmd.OutOrStdout(), args, fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.json, "json", false, "print one JSON object per file, in an array")
	f.BoolVar(&fl.requireCRC, "require-crc", false, "report records without a crc (lines written by other tools, e.g. Codex)")
	f.StringVar(&fl.data, "data", "", "check the data dir `DIR` (its index, mirror files and bus) instead of FILEs")
	return cmd
}

// fileCheck is the verification of one file.
type fileCheck struct {
	path string
	size int64 // bytes on disk; -1 when unknown
	rep  rollout.VerifyReport
	err  error // the file could not be read to its end
}

func (c *fileCheck) ok() bool { return c.err == nil && c.rep.OK() }

func checkFile(path string, opt rollout.VerifyOptions) fileCheck {
	c := fileCheck{path: path, size: -1, rep: rollout.VerifyReport{Name: path, SchemaVersion: -1}}
	f, err := openRollout(path)
	if err != nil {
		c.err = err
		return c
	}
	if st, err := os.Stat(path); err == nil {
		c.size = st.Size()
	}
	c.rep, err = rollout.Verify(f, opt)
	if err != nil {
		c.err = fileError(path, err)
	}
	return c
}

func runVerify(w io.Writer, paths []string, fl verifyFlags) error {
	opt := rollout.VerifyOptions{RequireCRC: fl.requireCRC}
	checks := make([]fileCheck, 0, len(paths))
	bad := 0
	for _, p := range paths {
		c := checkFile(p, opt)
		if !c.ok() {
			bad++
		}
		checks = append(checks, c)
	}
	var err error
	if fl.json {
		err = writeVerifyJSON(w, checks)
	} else {
		var buf bytes.Buffer
		writeVerifyText(&buf, checks)
		_, err = w.Write(buf.Bytes())
	}
	if err != nil {
		return err
	}
	switch {
	case bad == 0:
		return nil
	case len(paths) == 1 && checks[0].err != nil && checks[0].rep.Records == 0:
		return checks[0].err
	case len(paths) == 1:
		return fmt.Errorf("verify: %s has problems (listed on stdout)", paths[0])
	}
	return fmt.Errorf("verify: %d of %d files have problems (listed on stdout)", bad, len(paths))
}

// verifyJSON is the --json form of one file's check.
type verifyJSON struct {
	File       string `json:"file"`
	OK         bool   `json:"ok"`
	Compressed bool   `json:"compressed"`
	SizeBytes  int64  `json:"size_bytes"`
	// SchemaVersion is null when there is no session_meta.
	SchemaVersion *int          `json:"schema_version"`
	ReadOnly      bool          `json:"read_only,omitempty"`
	Lines         int           `json:"lines"`
	Records       int           `json:"records"`
	FirstOrdinal  int64         `json:"first_ordinal"`
	LastOrdinal   int64         `json:"last_ordinal"`
	WithCRC       int           `json:"with_crc"`
	Problems      []problemJSON `json:"problems"`
	// Error says why the file could not be read (to its end).
	Error string `json:"error,omitempty"`
}

type problemJSON struct {
	Kind    string `json:"kind"`
	Line    int    `json:"line"`
	Offset  int64  `json:"offset"`
	Ordinal int64  `json:"ordinal,omitempty"`
	Detail  string `json:"detail"`
}

func writeVerifyJSON(w io.Writer, checks []fileCheck) error {
	out := make([]verifyJSON, 0, len(checks))
	for i := range checks {
		out = append(out, verifyJSONOf(&checks[i]))
	}
	return writeJSON(w, out)
}

// verifyJSONOf is the --json form of one file's check.
func verifyJSONOf(c *fileCheck) verifyJSON {
	r := &c.rep
	v := verifyJSON{File: c.path, OK: c.ok(), Compressed: r.Compressed, SizeBytes: c.size, ReadOnly: r.ReadOnly(),
		Lines: r.Lines, Records: r.Records, FirstOrdinal: r.FirstOrdinal, LastOrdinal: r.LastOrdinal, WithCRC: r.WithCRC,
		Problems: []problemJSON{}}
	if r.SchemaVersion >= 0 {
		sv := r.SchemaVersion
		v.SchemaVersion = &sv
	}
	for _, p := range r.Problems {
		v.Problems = append(v.Problems, problemJSON{Kind: rollout.KindName(p.Kind), Line: p.Line, Offset: p.Offset,
			Ordinal: p.Ordinal, Detail: p.Detail})
	}
	if c.err != nil {
		v.Error = oneLine(c.err.Error())
	}
	return v
}

// maxProblemRows bounds the problems listed per file; --json lists all.
const maxProblemRows = 50

func writeVerifyText(w io.Writer, checks []fileCheck) {
	bad := 0
	for i := range checks {
		c := &checks[i]
		if !c.ok() {
			bad++
		}
		writeFileCheck(w, c)
	}
	if len(checks) > 1 {
		fmt.Fprintf(w, "%s verified: %d ok, %d with problems\n", plural(len(checks), "file", "files"), len(checks)-bad, bad)
	}
}

func writeFileCheck(w io.Writer, c *fileCheck) {
	r := &c.rep
	status := "ok"
	if !c.ok() {
		n := len(r.Problems)
		if c.err != nil {
			n++
		}
		status = plural(n, "problem", "problems")
	}
	if c.err != nil && r.Records == 0 && len(r.Problems) == 0 {
		fmt.Fprintf(w, "cannot read %s\n", oneLine(c.err.Error()))
		return
	}
	fmt.Fprintf(w, "%s: %s: %s\n", c.path, status, fileSummary(c))
	rows := problemRows(r.Problems)
	for i, row := range rows {
		if i == maxProblemRows {
			fmt.Fprintf(w, "  … %s more (--json lists all)\n", plural(len(rows)-i, "problem", "problems"))
			break
		}
		fmt.Fprintf(w, "  %s\n", row)
	}
	if c.err != nil {
		fmt.Fprintf(w, "  %s: cannot read on after offset %s: %s\n", c.path, num(r.End), oneLine(c.err.Error()))
	}
}

// fileSummary is the one-line description of a checked file.
func fileSummary(c *fileCheck) string {
	r := &c.rep
	var version string
	switch {
	case r.SchemaVersion < 0:
		version = "no session_meta"
	case r.SchemaVersion == 0:
		version = "version 0 (Codex)"
	case r.ReadOnly():
		version = fmt.Sprintf("v%d (newer than this reader's v%d: read-only)", r.SchemaVersion, rollout.Version)
	default:
		version = "v" + strconv.Itoa(r.SchemaVersion)
	}
	ordinals := "no ordinals"
	if r.FirstOrdinal > 0 {
		ordinals = fmt.Sprintf("ordinals %d-%d", r.FirstOrdinal, r.LastOrdinal)
	}
	var crc string
	switch {
	case r.WithCRC == 0:
		crc = "no crc"
	case r.WithCRC == r.Records:
		crc = "crc on all"
	default:
		crc = fmt.Sprintf("crc on %s of %s", num(int64(r.WithCRC)), num(int64(r.Records)))
	}
	format := "plain JSONL"
	if r.Compressed {
		format = "zstd"
	}
	if c.size >= 0 {
		format += fmt.Sprintf(" (%s bytes)", num(c.size))
	}
	return fmt.Sprintf("%s, %s, %s, %s, %s", version, plural(r.Records, "record", "records"), ordinals, crc, format)
}

// problemRows renders problems as "file:line: kind (offset, ordinal): detail";
// consecutive missing crcs (every line of a Codex file) become one row.
func problemRows(problems []*rollout.CorruptionError) []string {
	var rows []string
	for i := 0; i < len(problems); i++ {
		p := problems[i]
		if errors.Is(p.Kind, rollout.ErrMissingCRC) {
			j := i
			for j+1 < len(problems) && errors.Is(problems[j+1].Kind, rollout.ErrMissingCRC) &&
				problems[j+1].Line == problems[j].Line+1 && p.Line > 0 {
				j++
			}
			if j > i {
				rows = append(rows, fmt.Sprintf("%s:%d-%d: missing_crc (offsets %s-%s): %d records written without a crc",
					p.Name, p.Line, problems[j].Line, num(p.Offset), num(problems[j].Offset), j-i+1))
				i = j
				continue
			}
		}
		loc := p.Name
		if p.Line > 0 {
			loc += ":" + strconv.Itoa(p.Line)
		}
		at := "offset " + num(p.Offset)
		if p.Ordinal > 0 {
			at += ", ordinal " + strconv.FormatInt(p.Ordinal, 10)
		}
		if errors.Is(p.Kind, rollout.ErrNoSessionMeta) {
			rows = append(rows, fmt.Sprintf("%s: %s: %s", loc, rollout.KindName(p.Kind), oneLine(p.Detail)))
			continue
		}
		rows = append(rows, fmt.Sprintf("%s: %s (%s): %s", loc, rollout.KindName(p.Kind), at, oneLine(p.Detail)))
	}
	return rows
}
