package rollout_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// verifyLog is a clean ten-record v1 rollout.
func verifyLog() []byte {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	b := &rollout.Builder{Now: func() time.Time { return t0 }}
	recs := []rollout.Record{
		b.Meta(rollout.SessionMeta{ID: "thread-V", RolloutID: "rollout-V", Source: rollout.Source{Kind: "cli"}, Cwd: "/repo"}),
		b.TaskStarted("t1"),
		b.UserMessage("hello"),
		b.TurnContext(rollout.TurnContext{TurnID: "t1", Model: "m", ApprovalPolicy: "never"}),
		b.Message("user", "hello"),
		b.Call("call-1", "deploy", `{}`, "deploy-1"),
		b.Output("call-1", "ok"),
		b.Message("assistant", "done"),
		b.TaskComplete("t1"),
		b.TokenCount(100, 100),
	}
	return rollout.MemOf("v.jsonl", recs).Bytes()
}

// verifyLines splits JSONL into lines, each with its '\n'.
func verifyLines(data []byte) [][]byte {
	return bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

// verifyEdit rewrites the lines of data with fn.
func verifyEdit(data []byte, fn func(lines [][]byte) [][]byte) []byte {
	lines := verifyLines(data)
	for i, l := range lines {
		if !bytes.HasSuffix(l, []byte("\n")) {
			lines[i] = append(l, '\n')
		}
	}
	return bytes.Join(fn(lines), nil)
}

type verifyFinding struct {
	kind    error
	line    int
	ordinal int64
}

func TestVerify(t *testing.T) {
	clean := verifyLog()
	offsetOf := func(data []byte, line int) int64 {
		var off int64
		for _, l := range verifyLines(data)[:line-1] {
			off += int64(len(l))
		}
		return off
	}
	stripCRC := func(l []byte) []byte {
		i := bytes.LastIndex(l, []byte(`,"crc":`))
		return append(append([]byte(nil), l[:i]...), "}\n"...)
	}
	tests := []struct {
		name    string
		data    []byte
		opt     rollout.VerifyOptions
		records int
		want    []verifyFinding
	}{
		{name: "clean", data: clean, records: 10},
		{name: "clean, crc required", data: clean, opt: rollout.VerifyOptions{RequireCRC: true}, records: 10},
		{name: "torn tail", data: clean[:len(clean)-30], records: 9,
			want: []verifyFinding{{rollout.ErrTornTail, 10, 0}}},
		{name: "corrupt middle line", records: 9,
			data: verifyEdit(clean, func(ls [][]byte) [][]byte { ls[4] = []byte("{\"timestamp\":garbage\n"); return ls }),
			want: []verifyFinding{{rollout.ErrCorruptLine, 5, 0}}},
		{name: "crc mismatch", records: 9,
			data: verifyEdit(clean, func(ls [][]byte) [][]byte {
				ls[6] = bytes.Replace(ls[6], []byte(`"ok"`), []byte(`"KO"`), 1)
				return ls
			}),
			want: []verifyFinding{{rollout.ErrCRCMismatch, 7, 7}}},
		{name: "dropped line", records: 9,
			data: verifyEdit(clean, func(ls [][]byte) [][]byte { return append(ls[:3:3], ls[4:]...) }),
			want: []verifyFinding{{rollout.ErrOrdinalGap, 4, 5}}},
		{name: "duplicated line", records: 10,
			data: verifyEdit(clean, func(ls [][]byte) [][]byte { return append(ls[:4:4], ls[3:]...) }),
			want: []verifyFinding{{rollout.ErrOrdinalDuplicate, 5, 4}}},
		{name: "lost head", records: 8,
			data: verifyEdit(clean, func(ls [][]byte) [][]byte { return ls[2:] }),
			want: []verifyFinding{{rollout.ErrOrdinalGap, 1, 3}, {rollout.ErrNoSessionMeta, 0, 0}}},
		{name: "missing crc", records: 10,
			data: verifyEdit(clean, func(ls [][]byte) [][]byte { ls[1] = stripCRC(ls[1]); return ls }),
			opt:  rollout.VerifyOptions{RequireCRC: true},
			want: []verifyFinding{{rollout.ErrMissingCRC, 2, 2}}},
		{name: "missing crc allowed", records: 10,
			data: verifyEdit(clean, func(ls [][]byte) [][]byte { ls[1] = stripCRC(ls[1]); return ls })},
		{name: "empty", data: nil, want: []verifyFinding{{rollout.ErrNoSessionMeta, 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := rollout.Verify(rollout.NewMem("v.jsonl", tt.data), tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Records != tt.records {
				t.Errorf("records = %d, want %d", rep.Records, tt.records)
			}
			if rep.OK() != (len(tt.want) == 0) {
				t.Errorf("OK() = %v with %d problems", rep.OK(), len(rep.Problems))
			}
			var got []verifyFinding
			for _, p := range rep.Problems {
				got = append(got, verifyFinding{p.Kind, p.Line, p.Ordinal})
				if p.Name != "v.jsonl" {
					t.Errorf("problem names %q, want the log's name", p.Name)
				}
				if p.Line > 0 && p.Offset != offsetOf(tt.data, p.Line) {
					t.Errorf("%v: offset %d, line %d starts at %d", p, p.Offset, p.Line, offsetOf(tt.data, p.Line))
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %v, want %v", rep.Problems, tt.want)
			}
			for i := range got {
				if !errors.Is(got[i].kind, tt.want[i].kind) || got[i].line != tt.want[i].line || got[i].ordinal != tt.want[i].ordinal {
					t.Errorf("problem %d = %v, want %s at line %d ordinal %d", i, rep.Problems[i],
						rollout.KindName(tt.want[i].kind), tt.want[i].line, tt.want[i].ordinal)
				}
			}
		})
	}
}

func TestVerifySummary(t *testing.T) {
	data := verifyLog()
	rep, err := rollout.Verify(rollout.NewMem("v.jsonl", data), rollout.VerifyOptions{RequireCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	want := rollout.VerifyReport{Name: "v.jsonl", SchemaVersion: 1, Lines: 10, Records: 10, End: int64(len(data)),
		FirstOrdinal: 1, LastOrdinal: 10, WithCRC: 10}
	if rep.Compressed || rep.SchemaVersion != want.SchemaVersion || rep.Lines != want.Lines || rep.End != want.End ||
		rep.FirstOrdinal != want.FirstOrdinal || rep.LastOrdinal != want.LastOrdinal || rep.WithCRC != want.WithCRC || !rep.OK() {
		t.Errorf("report = %+v, want %+v", rep, want)
	}

	// The torn tail's bytes are not part of the intact end.
	torn := append(append([]byte(nil), data...), `{"timestamp":"2026`...)
	rep, err = rollout.Verify(rollout.NewMem("v.jsonl", torn), rollout.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.End != int64(len(data)) || rep.Lines != 11 || rep.Records != 10 {
		t.Errorf("torn: end %d lines %d records %d, want %d 11 10", rep.End, rep.Lines, rep.Records, len(data))
	}
}

// TestVerifyCompressed reads the same log through a .jsonl.zst file.
func TestVerifyCompressed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.jsonl.zst")
	var z bytes.Buffer
	data := verifyLog()
	bad := verifyEdit(data, func(ls [][]byte) [][]byte { return append(ls[:3:3], ls[4:]...) })
	if err := rollout.WriteZst(&z, bytes.NewReader(bad)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := rollout.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rollout.Verify(f, rollout.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Compressed || rep.Records != 9 || len(rep.Problems) != 1 || !errors.Is(rep.Problems[0].Kind, rollout.ErrOrdinalGap) ||
		rep.Problems[0].Line != 4 {
		t.Errorf("report = %+v, problems %v", rep, rep.Problems)
	}
	if !strings.Contains(rep.Problems[0].Error(), path+" line 4") {
		t.Errorf("problem %q does not name the file and line", rep.Problems[0])
	}
}

// TestVerifyCodex: real version-0 rollouts are clean, and every line lacks
// a crc when one is required.
func TestVerifyCodex(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/codex-real/sessions/*/*/*/*.jsonl")
	if err != nil || len(paths) != 6 {
		t.Fatalf("want the six Codex sessions, found %d (%v)", len(paths), err)
	}
	for _, p := range paths {
		f, err := rollout.OpenFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := rollout.Verify(f, rollout.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || rep.SchemaVersion != 0 || rep.FirstOrdinal != 0 || rep.Records == 0 || rep.WithCRC != 0 {
			t.Errorf("%s: %+v", p, rep)
		}
		strict, err := rollout.Verify(f, rollout.VerifyOptions{RequireCRC: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(strict.Problems) != rep.Records {
			t.Errorf("%s: %d missing-crc findings for %d records", p, len(strict.Problems), rep.Records)
		}
	}
}

func TestVerifyMissingFile(t *testing.T) {
	f, err := rollout.OpenFile(filepath.Join(t.TempDir(), "v.jsonl"))
	if err == nil {
		_, err = rollout.Verify(f, rollout.VerifyOptions{})
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want not-exist", err)
	}
}

func TestKindName(t *testing.T) {
	for _, k := range []error{rollout.ErrTornTail, rollout.ErrCorruptLine, rollout.ErrCRCMismatch, rollout.ErrOrdinalGap,
		rollout.ErrOrdinalDuplicate, rollout.ErrMissingOrdinal, rollout.ErrMissingCRC, rollout.ErrNoSessionMeta} {
		name := rollout.KindName(k)
		if name == "unknown" || strings.ContainsAny(name, " :") {
			t.Errorf("KindName(%v) = %q", k, name)
		}
	}
}
