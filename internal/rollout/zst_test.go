package rollout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// withFrameBytes makes WriteZst aim for frames of n bytes for one test.
func withFrameBytes(t *testing.T, n int) {
	t.Helper()
	old := frameBytes
	frameBytes = n
	t.Cleanup(func() { frameBytes = old })
}

// writeZst compresses data into a .jsonl.zst in a test directory.
func writeZst(t *testing.T, data []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteZst(&buf, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, "r.jsonl.zst", buf.Bytes())
}

// frames reads the seek table of a seekable file.
func frames(t *testing.T, path string) *zstIndex {
	t.Helper()
	z := readFile(t, path)
	idx, err := readSeekTable(bytes.NewReader(z), int64(len(z)))
	if err != nil || idx == nil {
		t.Fatalf("%s: seek table %v, %v", path, idx, err)
	}
	return idx
}

func decompress(t *testing.T, path string) []byte {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	data, err := decompressAll(fh)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestZstRoundTrip: every golden and real rollout compresses to a file any
// zstd decoder reads back byte for byte, and that reads like the plain file
// both ways.
func TestZstRoundTrip(t *testing.T) {
	paths := codexFiles(t)
	for _, p := range goldenPaths(t) {
		paths = append(paths, p)
	}
	for _, path := range paths {
		data := readFile(t, path)
		zpath := writeZst(t, data)
		if !bytes.Equal(decompress(t, zpath), data) {
			t.Fatalf("%s: decompressed bytes differ", path)
		}
		z := openFile(t, zpath)
		if !z.Compressed() || openFile(t, path).Compressed() {
			t.Fatalf("%s: Compressed is wrong", path)
		}
		plain := openFile(t, path)
		fwd := forward(t, plain, 0)
		diffSteps(t, path+" zst forward", forward(t, z, 0), fwd)
		bwd := backward(t, plain)
		diffSteps(t, path+" zst backward", backward(t, z), bwd)
	}
}

// TestZstManyFrames forces tiny frames: every frame holds whole lines, a
// line longer than a frame gets a frame of its own, and reading backward
// over many frames, forward from every line start and LineNumbers all agree
// with the plain file.
func TestZstManyFrames(t *testing.T) {
	withFrameBytes(t, 1024)
	for _, path := range []string{codexPath(t, "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"), filepath.Join(goldenDir, "missing-ordinal.jsonl"),
		filepath.Join(goldenDir, "torn-unterminated.jsonl")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data := readFile(t, path)
			zpath := writeZst(t, data)
			idx := frames(t, zpath)
			if len(idx.frames) < 5 {
				t.Fatalf("%d frames", len(idx.frames))
			}
			var joined []byte
			for i, fr := range idx.frames {
				chunk := data[fr.uOff : fr.uOff+fr.uSize]
				if i < len(idx.frames)-1 && chunk[len(chunk)-1] != '\n' {
					t.Fatalf("frame %d does not end a line", i)
				}
				if fr.uSize > 1024 && bytes.Count(chunk, []byte("\n")) > 1 {
					t.Fatalf("frame %d holds %d bytes and more than one line", i, fr.uSize)
				}
				joined = append(joined, chunk...)
			}
			if !bytes.Equal(joined, data) || idx.total != int64(len(data)) {
				t.Fatal("frames do not cover the data")
			}
			plain, z := NewMem(path, data), openFile(t, zpath)
			all := forward(t, plain, 0)
			checkBackward(t, "backward", backward(t, z), all)
			starts := lineStarts(data)
			for _, from := range starts[1:] {
				diffSteps(t, "Forward(from)", forward(t, z, from), forward(t, plain, from))
			}
			for _, from := range []int64{starts[1] - 1, starts[1] + 1, int64(len(data)) + 1, -1} {
				if _, err := z.Forward(from); err == nil {
					t.Errorf("Forward(%d) inside a line or beyond the end succeeds", from)
				}
			}
			if bytes.HasSuffix(data, []byte("\n")) {
				if got := forward(t, z, int64(len(data))); len(got) != 0 {
					t.Errorf("Forward(end) yields %v", got)
				}
			}
			want, _ := plain.LineNumbers(starts)
			got, err := z.LineNumbers(starts)
			if err != nil || len(got) != len(want) {
				t.Fatalf("LineNumbers: %v", err)
			}
			for off, n := range want {
				if got[off] != n {
					t.Fatalf("LineNumbers(%d) = %d, want %d", off, got[off], n)
				}
			}
		})
	}
}

// TestZstLongLine: a line longer than the writer's read buffer stays whole in
// one frame.
func TestZstLongLine(t *testing.T) {
	withFrameBytes(t, 4096)
	b := &Builder{Now: goldenClock()}
	recs := []Record{b.Message("user", "short"), b.Message("assistant", strings.Repeat("long line ", 150_000)), b.Message("user", "after")}
	data := MemOf("long", recs).Bytes()
	zpath := writeZst(t, data)
	idx := frames(t, zpath)
	if len(idx.frames) != 3 {
		t.Fatalf("%d frames for three lines, the middle one %d bytes", len(idx.frames), len(recs[1].Append(nil)))
	}
	z := openFile(t, zpath)
	all := forward(t, z, 0)
	if len(all) != 3 || all[1].Raw != string(recs[1].Append(nil)) {
		t.Fatal("the long line is not read back")
	}
	diffSteps(t, "backward", backward(t, z), reversed(all))
	diffSteps(t, "Forward(last)", forward(t, z, all[2].Off), suffix(all, all[2].Off))
}

// TestZstPlain: a zstd file without a seek table (any zstd tool's output) is
// read both ways by decompressing it whole.
func TestZstPlain(t *testing.T) {
	path := codexPath(t, "019c8bfe-ec25-79e0-97d7-bda6a9c575ff")
	data := readFile(t, path)
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	// Two writes and a flush in between: two frames, no seek table.
	for _, part := range [][]byte{data[:len(data)/2], data[len(data)/2:]} {
		if _, err := enc.Write(part); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		enc.Reset(&buf)
	}
	zpath := writeTemp(t, "plain.jsonl.zst", buf.Bytes())
	if idx, err := readSeekTable(bytes.NewReader(buf.Bytes()), int64(buf.Len())); idx != nil || err != nil {
		t.Fatalf("a plain zstd file has a seek table: %v %v", idx, err)
	}
	z, plain := openFile(t, zpath), NewMem(path, data)
	all := forward(t, plain, 0)
	diffSteps(t, "forward", forward(t, z, 0), all)
	diffSteps(t, "backward", backward(t, z), reversed(all))
	for _, from := range lineStarts(data)[1:] {
		diffSteps(t, "Forward(from)", forward(t, z, from), forward(t, plain, from))
	}
	if _, err := z.Forward(lineStarts(data)[1] + 3); !errors.Is(err, ErrNotLineStart) {
		t.Errorf("Forward inside a line: %v", err)
	}
	got, err := z.LineNumbers([]int64{lineStarts(data)[10]})
	if err != nil || got[lineStarts(data)[10]] != 11 {
		t.Errorf("LineNumbers = %v, %v", got, err)
	}
}

func TestZstEmpty(t *testing.T) {
	zpath := writeZst(t, nil)
	if idx := frames(t, zpath); len(idx.frames) != 0 || idx.total != 0 {
		t.Fatalf("empty input: %+v", idx)
	}
	z := openFile(t, zpath)
	if got := forward(t, z, 0); len(got) != 0 {
		t.Errorf("forward: %v", got)
	}
	if got := backward(t, z); len(got) != 0 {
		t.Errorf("backward: %v", got)
	}
}

// TestZstDamagedSeekTable: a seek table that does not describe the file is
// a clear error (ErrSeekTable), never a misread.
func TestZstDamagedSeekTable(t *testing.T) {
	withFrameBytes(t, 2048)
	data := readFile(t, filepath.Join(goldenDir, "v1-all.jsonl"))
	var buf bytes.Buffer
	if err := WriteZst(&buf, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	n := len(good)
	count := int(binary.LittleEndian.Uint32(good[n-9:]))
	tableStart := n - seekFooterSize - 8*count - 8
	tests := []struct {
		name   string
		damage func(b []byte)
	}{
		{"compressed size", func(b []byte) { b[tableStart+8]++ }},
		{"decompressed size", func(b []byte) { b[tableStart+8+4]++ }},
		{"frame count", func(b []byte) { b[n-9]++ }},
		{"frame count beyond the file", func(b []byte) { binary.LittleEndian.PutUint32(b[n-9:], 1<<30) }},
		{"table frame size", func(b []byte) { b[tableStart+4]++ }},
		{"table frame magic", func(b []byte) { b[tableStart]++ }},
	}
	for _, tt := range tests {
		b := bytes.Clone(good)
		tt.damage(b)
		z := openFile(t, writeTemp(t, "d.jsonl.zst", b))
		var err error
		if c, e := z.Backward(); e != nil {
			err = e
		} else {
			_, err = drainErr(c)
		}
		if c, e := z.Forward(lineStarts(data)[20]); e != nil && err == nil {
			err = e
		} else if e == nil {
			if _, e := drainErr(c); err == nil {
				err = e
			}
		}
		if !errors.Is(err, ErrSeekTable) {
			t.Errorf("%s: %v, want ErrSeekTable", tt.name, err)
		}
	}
}

// drainErr reads a cursor to its end and returns the first error that is
// not damage.
func drainErr(c Cursor) (int, error) {
	defer c.Close()
	n := 0
	for {
		_, err := c.Next()
		var ce *CorruptionError
		switch {
		case errors.Is(err, io.EOF):
			return n, nil
		case errors.As(err, &ce):
		case err != nil:
			return n, err
		}
		n++
	}
}

func TestOpenFile(t *testing.T) {
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := OpenFile(t.TempDir()); err == nil {
		t.Error("a directory opens")
	}
	f := openFile(t, smallCodex(t))
	if f.Name() != smallCodex(t) {
		t.Errorf("Name = %s", f.Name())
	}
}
