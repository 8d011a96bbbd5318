package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyClean(t *testing.T) {
	args := []string{"verify"}
	for _, name := range []string{"chapter-rollback-1", "chapter-rollback-2", "chapter-rollback-3", "mid-turn-compaction"} {
		args = append(args, example(name))
	}
	args = append(args, codexFiles(t)...)
	r := runCLI(t, args...)
	r.wantCode(t, exitOK)
	r.wantOut(t,
		example("chapter-rollback-1")+": ok: v1, 25 records, ordinals 1-25, crc on all, plain JSONL (4,703 bytes)",
		"-7738fc5ab61a.jsonl: ok: version 0 (Codex), 702 records, no ordinals, no crc, plain JSONL (278,358 bytes)",
		"10 files verified: 10 ok, 0 with problems")
	if r.stderr != "" {
		t.Errorf("stderr: %q", r.stderr)
	}
}

func TestVerifyProblems(t *testing.T) {
	chapter := example("chapter-rollback-1")
	tests := []struct {
		name string
		edit func([][]byte) [][]byte
		rows []string // {N}: the offset of line N
	}{
		{"torn", tornTail, []string{":25: torn_tail (offset {25}): 72 bytes without a final newline"}},
		// A damaged line accounts for the ordinal it held: no second report.
		{"corrupt", corruptLine(12), []string{
			":12: corrupt_line (offset {12}): rollout: invalid record: no payload"}},
		{"crc", flipPayload(t, 17, "succeeded", "succeedeD"), []string{
			":17: crc_mismatch (offset {17}, ordinal 17): crc 17fd7f94, payload checksums to f6b98480"}},
		{"dropped", func(ls [][]byte) [][]byte { return append(ls[:4:4], ls[5:]...) }, []string{
			":5: ordinal_gap (offset {5}, ordinal 6): expected ordinal 5, found 6 (1 missing)"}},
		{"duplicated", func(ls [][]byte) [][]byte { return append(ls[:5:5], ls[4:]...) }, []string{
			":6: ordinal_duplicate (offset {6}, ordinal 5): ordinal 5 after ordinal 5"}},
		{"headless", func(ls [][]byte) [][]byte { return ls[1:] }, []string{
			":1: ordinal_gap (offset 0, ordinal 2): expected ordinal 1, found 2 (1 missing)",
			": no_session_meta: 24 records read: not a rollout, or its head was lost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := damaged(t, chapter, tt.edit)
			r := runCLI(t, "verify", path)
			r.wantOneLineError(t, "verify: "+path+" has problems")
			r.wantOut(t, path+": "+plural(len(tt.rows), "problem", "problems")+": ")
			for _, row := range tt.rows {
				r.wantOut(t, "\n  "+path+atLines(t, path, row)+"\n")
			}
		})
	}
}

// TestVerifyMany: one bad file among good ones fails the run, and every
// file is still checked.
func TestVerifyMany(t *testing.T) {
	bad := damaged(t, example("mid-turn-compaction"), corruptLine(3))
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	r := runCLI(t, "verify", example("chapter-rollback-1"), bad, missing, example("chapter-rollback-2"))
	r.wantOneLineError(t, "verify: 2 of 4 files have problems")
	r.wantOut(t, example("chapter-rollback-1")+": ok", bad+": 1 problem", "cannot read "+missing+": no such file",
		example("chapter-rollback-2")+": ok", "4 files verified: 2 ok, 2 with problems")

	r = runCLI(t, "verify", missing)
	r.wantOneLineError(t, missing+": no such file")
}

func TestVerifyRequireCRC(t *testing.T) {
	codex := codexFiles(t)
	r := runCLI(t, "verify", "--require-crc", codex[0])
	r.wantCode(t, exitFailure)
	r.wantOut(t, codex[0]+":1-702: missing_crc (offsets 0-", "702 records written without a crc")
	if n := strings.Count(r.stdout, "\n"); n != 2 {
		t.Errorf("missing crcs take %d lines, want one row:\n%s", n, r.stdout)
	}
	// Logbook's own files carry a crc on every line.
	runCLI(t, "verify", "--require-crc", example("mid-turn-compaction")).wantCode(t, exitOK)
}

func TestVerifyJSON(t *testing.T) {
	zst := compressed(t, example("mid-turn-compaction"))
	crc := damaged(t, example("chapter-rollback-1"), flipPayload(t, 17, "succeeded", "succeedeD"))
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	r := runCLI(t, "verify", "--json", zst, crc, codexFiles(t)[4], missing)
	r.wantCode(t, exitFailure)
	var got []verifyJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v in %s", err, r.stdout)
	}
	if len(got) != 4 {
		t.Fatalf("%d reports for 4 files", len(got))
	}
	st, err := os.Stat(zst)
	if err != nil {
		t.Fatal(err)
	}
	if z := got[0]; !z.OK || !z.Compressed || z.SizeBytes != st.Size() || z.SchemaVersion == nil || *z.SchemaVersion != 1 ||
		z.Records != 21 || z.FirstOrdinal != 1 || z.LastOrdinal != 21 || z.WithCRC != 21 || len(z.Problems) != 0 {
		t.Errorf("zst report: %+v", z)
	}
	c := got[1]
	// One damaged line is one problem: the ordinal it held is not reported
	// again as a gap.
	if c.OK || len(c.Problems) != 1 || c.Problems[0] != (problemJSON{Kind: "crc_mismatch", Line: 17, Offset: lineOffset(t, crc, 17), Ordinal: 17,
		Detail: "crc 17fd7f94, payload checksums to f6b98480"}) || c.Records != 24 || c.Lines != 25 {
		t.Errorf("crc report: %+v", c)
	}
	if v0 := got[2]; !v0.OK || v0.SchemaVersion == nil || *v0.SchemaVersion != 0 || v0.FirstOrdinal != 0 || v0.WithCRC != 0 {
		t.Errorf("codex report: %+v", v0)
	}
	if m := got[3]; m.OK || m.SchemaVersion != nil || m.Error != missing+": no such file" || m.Problems == nil {
		t.Errorf("missing report: %+v", m)
	}
	// The text form summarises the compressed file as such.
	runCLI(t, "verify", zst).wantOut(t, zst+": ok: v1, 21 records, ordinals 1-21, crc on all, zstd (")
}
