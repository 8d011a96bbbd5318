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
	if !f.zst {
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, err
		}
		if err := checkLineStart(f.path, fh, from); err != nil {
			fh.Close()
			return nil, err
		}
		if _, err := fh.Seek(from, io.SeekStart); err != nil {
			fh.Close()
			return nil, err
		}
		return newForwardCursor(f.path, fh, fh, from), nil
	}
	z, err := f.openZst()
	if err != nil {
		return nil, err
	}
	var src io.Reader = z.f
	skip := from
	if z.idx != nil && from > 0 {
		i := z.idx.frameAt(from)
		if i >= len(z.idx.frames) {
			z.f.Close()
			if from == z.idx.total {
				return newForwardCursor(f.path, bytes.NewReader(nil), nil, from), nil
			}
			return nil, fmt.Errorf("rollout %s offset %d: beyond the end (%d bytes)", f.path, from, z.idx.total)
		}
		fr := z.idx.frames[i]
		src = io.NewSectionReader(z.f, fr.cOff, z.n-fr.cOff)
		skip = from - fr.uOff
	}
	dec, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1))
	if err != nil {
		z.f.Close()
		return nil, err
	}
	closer := multiCloser{decCloser{dec}, z.f}
	if from > 0 {
		// Check the byte before from is a newline, then we are at from.
		if _, err := io.CopyN(io.Discard, dec, skip-1); err != nil {
			closer.Close()
			return nil, fmt.Errorf("rollout %s offset %d: %w", f.path, from, err)
		}
		var b [1]byte
		if _, err := io.ReadFull(dec, b[:]); err != nil || b[0] != '\n' {
			closer.Close()
			return nil, fmt.Errorf("rollout %s offset %d: %w", f.path, from, ErrNotLineStart)
		}
	}
	return newForwardCursor(f.path, dec, closer, from), nil
}

// Backward implements Log.
func (f *File) Backward() (Cursor, error) {
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
		return newBackwardCursor(f.path, &readerAtBlocks{ra: fh, n: st.Size(), block: 64 << 10}, fh), nil
	}
	z, err := f.openZst()
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		z.f.Close()
		return nil, err
	}
	if z.idx != nil {
		return newBackwardCursor(f.path, &zstBlocks{ra: z.f, idx: z.idx, dec: dec}, multiCloser{decCloser{dec}, z.f}), nil
	}
	// No seek table: decompress the whole file once.
	dec.Close()
	defer z.f.Close()
	data, err := decompressAll(z.f)
	if err != nil {
		return nil, fmt.Errorf("rollout %s: %w", f.path, err)
	}
	r := bytes.NewReader(data)
	return newBackwardCursor(f.path, &readerAtBlocks{ra: r, n: int64(len(data)), block: 64 << 10}, nil), nil
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
	return newForwardCursor(m.name, bytes.NewReader(m.data[from:]), nil, from), nil
}

// Backward implements Log.
func (m *Mem) Backward() (Cursor, error) {
	return newBackwardCursor(m.name, &readerAtBlocks{ra: bytes.NewReader(m.data), n: int64(len(m.data)), block: 64 << 10}, nil), nil
}

// LineNumbers implements Log.
func (m *Mem) LineNumbers(offsets []int64) (map[int64]int, error) {
	return countLines(bytes.NewReader(m.data), offsets)
}
