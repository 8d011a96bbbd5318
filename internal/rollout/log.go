package rollout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Log is a rollout readable from either end. Offsets are byte offsets in the
// uncompressed JSONL.
type Log interface {
	Name() string
	// Forward reads from the line starting at byte offset from (0: the head).
	Forward(from int64) (Cursor, error)
	// Backward reads from the tail toward the head.
	Backward() (Cursor, error)
	// LineNumbers returns the line number of the line starting at each offset.
	LineNumbers(offsets []int64) (map[int64]int, error)
}

var (
	_ Log = (*File)(nil)
	_ Log = (*Mem)(nil)
)

// ZstExt is the extension of a compressed rollout.
const ZstExt = ".zst"

// File is a rollout file, .jsonl or .jsonl.zst. It opens the file for each
// cursor, so a File is safe to share.
type File struct {
	path string
	zst  bool
}

// OpenFile checks that path is a readable rollout file.
func OpenFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("rollout %s: is a directory", path)
	}
	return &File{path: path, zst: strings.HasSuffix(path, ZstExt)}, nil
}

// Name is the file's path.
func (f *File) Name() string { return f.path }

// Compressed reports whether the file is zstd.
func (f *File) Compressed() bool { return f.zst }

type zstFile struct {
	f   *os.File
	n   int64
	idx *zstIndex
}

func (f *File) openZst() (*zstFile, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	idx, err := readSeekTable(fh, st.Size())
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("rollout %s: %w", f.path, err)
	}
	return &zstFile{f: fh, n: st.Size(), idx: idx}, nil
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type decCloser struct{ d *zstd.Decoder }

func (d decCloser) Close() error { d.d.Close(); return nil }

// Forward implements Log.
func (f *File) Forward(from int64) (Cursor, error) {
	if from < 0 {
		return nil, fmt.Errorf("rollout %s offset %d: %w", f.path, from, ErrNotLineStart)
	}
	if !f.zst {
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, err
		}
		mode := modeUnknown
		if from > 0 {
			err = checkLineStart(f.path, fh, from)
			if err == nil {
				mode, err = headMode(f.path, io.NewSectionReader(fh, 0, from))
			}
		}
		if err == nil {
			_, err = fh.Seek(from, io.SeekStart)
		}
		if err != nil {
			fh.Close()
			return nil, err
		}
		return newForwardCursor(f.path, fh, fh, from, mode), nil
	}
	z, err := f.openZst()
	if err != nil {
		return nil, err
	}
	if from == 0 {
		return z.forward(f.path, z.f, 0, 0, modeUnknown)
	}
	mode, err := z.headMode(f.path, from)
	if err != nil {
		z.f.Close()
		return nil, err
	}
	if z.idx == nil {
		return z.forward(f.path, z.f, from, from, mode)
	}
	// Decompress from the frame holding the byte before from: it must be a
	// newline (a frame start is not necessarily a line start).
	i := z.idx.frameAt(from - 1)
	if i >= len(z.idx.frames) {
		z.f.Close()
		return nil, fmt.Errorf("rollout %s offset %d: beyond the end (%d bytes)", f.path, from, z.idx.total)
	}
	fr := z.idx.frames[i]
	return z.forward(f.path, io.NewSectionReader(z.f, fr.cOff, z.n-fr.cOff), from, from-fr.uOff, mode)
}

// forward starts a cursor at uncompressed offset from, reading the
// compressed src, which decompresses to skip bytes before from.
func (z *zstFile) forward(name string, src io.Reader, from, skip int64, mode ordinalMode) (Cursor, error) {
	dec, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1))
	if err != nil {
		z.f.Close()
		return nil, err
	}
	closer := multiCloser{decCloser{dec}, z.f}
	if skip > 0 {
		if _, err := io.CopyN(io.Discard, dec, skip-1); err != nil {
			closer.Close()
			return nil, fmt.Errorf("rollout %s offset %d: beyond the end: %w", name, from, err)
		}
		var b [1]byte
		if _, err := io.ReadFull(dec, b[:]); err != nil {
			closer.Close()
			return nil, fmt.Errorf("rollout %s offset %d: beyond the end: %w", name, from, err)
		}
		if b[0] != '\n' {
			closer.Close()
			return nil, fmt.Errorf("rollout %s offset %d: %w", name, from, ErrNotLineStart)
		}
	}
	return newForwardCursor(name, dec, closer, from, mode), nil
}

// headMode decompresses the head of the file, up to offset limit (-1: the
// whole file), to its first valid record.
func (z *zstFile) headMode(name string, limit int64) (ordinalMode, error) {
	dec, err := zstd.NewReader(io.NewSectionReader(z.f, 0, z.n), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return modeUnknown, err
	}
	defer dec.Close()
	var r io.Reader = dec
	if limit >= 0 {
		r = io.LimitReader(dec, limit)
	}
	return headMode(name, r)
}

// Backward implements Log.
func (f *File) Backward() (Cursor, error) { return f.backwardTo(-1) }

// backwardTo reads backward from end (a line boundary; -1: the end of the
// file).
func (f *File) backwardTo(end int64) (Cursor, error) {
	if !f.zst {
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, err
		}
		st, err := fh.Stat()
		if err != nil {
			fh.Close()
			return nil, err
		}
		mode, err := headMode(f.path, io.NewSectionReader(fh, 0, st.Size()))
		if err != nil {
			fh.Close()
			return nil, err
		}
		if end < 0 || end > st.Size() {
			end = st.Size()
		}
		return newBackwardCursorTo(f.path, &readerAtBlocks{ra: fh, n: st.Size(), block: 64 << 10}, fh, mode, end), nil
	}
	z, err := f.openZst()
	if err != nil {
		return nil, err
	}
	if z.idx != nil {
		mode, err := z.headMode(f.path, -1)
		if err != nil {
			z.f.Close()
			return nil, err
		}
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			z.f.Close()
			return nil, err
		}
		if end < 0 || end > z.idx.total {
			end = z.idx.total
		}
		return newBackwardCursorTo(f.path, &zstBlocks{ra: z.f, idx: z.idx, dec: dec}, multiCloser{decCloser{dec}, z.f}, mode, end), nil
	}
	// No seek table: decompress the whole file once.
	defer z.f.Close()
	data, err := decompressAll(z.f)
	if err != nil {
		return nil, fmt.Errorf("rollout %s: %w", f.path, err)
	}
	return NewMem(f.path, data).backwardTo(end)
}

func decompressAll(r io.Reader) ([]byte, error) {
	dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return io.ReadAll(dec)
}

// LineNumbers implements Log by counting newlines from the head.
func (f *File) LineNumbers(offsets []int64) (map[int64]int, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var r io.Reader = fh
	if f.zst {
		dec, err := zstd.NewReader(fh, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer dec.Close()
		r = dec
	}
	return countLines(r, offsets)
}

// Mem is a rollout held in memory: the reference implementation of Log, read
// by the same cursors as a file.
type Mem struct {
	name string
	data []byte
}

// NewMem wraps JSONL bytes.
func NewMem(name string, data []byte) *Mem { return &Mem{name: name, data: data} }

// MemOf encodes records into a Mem.
func MemOf(name string, recs []Record) *Mem {
	var b []byte
	for i := range recs {
		b = recs[i].Append(b)
		b = append(b, '\n')
	}
	return NewMem(name, b)
}

// Name implements Log.
func (m *Mem) Name() string { return m.name }

// Bytes returns the JSONL.
func (m *Mem) Bytes() []byte { return m.data }

// Forward implements Log.
func (m *Mem) Forward(from int64) (Cursor, error) {
	if from < 0 || from > int64(len(m.data)) {
		return nil, fmt.Errorf("rollout %s offset %d: out of range", m.name, from)
	}
	r := bytes.NewReader(m.data)
	if err := checkLineStart(m.name, r, from); err != nil {
		return nil, err
	}
	mode := modeUnknown
	if from > 0 {
		var err error
		if mode, err = headMode(m.name, bytes.NewReader(m.data[:from])); err != nil {
			return nil, err
		}
	}
	return newForwardCursor(m.name, bytes.NewReader(m.data[from:]), nil, from, mode), nil
}

// Backward implements Log.
func (m *Mem) Backward() (Cursor, error) { return m.backwardTo(-1) }

func (m *Mem) backwardTo(end int64) (Cursor, error) {
	mode, err := headMode(m.name, bytes.NewReader(m.data))
	if err != nil {
		return nil, err
	}
	n := int64(len(m.data))
	if end < 0 || end > n {
		end = n
	}
	return newBackwardCursorTo(m.name, &readerAtBlocks{ra: bytes.NewReader(m.data), n: n, block: 64 << 10}, nil, mode, end), nil
}

// LineNumbers implements Log.
func (m *Mem) LineNumbers(offsets []int64) (map[int64]int, error) {
	return countLines(bytes.NewReader(m.data), offsets)
}
