package rollout

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/klauspost/compress/zstd"
)

// The zstd seekable format (facebook/zstd contrib/seekable_format): data
// frames, then one skippable frame holding the seek table:
//
//	0x184D2A5E (LE u32)  skippable frame magic
//	frame size (LE u32)  bytes that follow in this frame
//	entries              per data frame: compressed size, decompressed size (LE u32 each)
//	number of frames     LE u32
//	descriptor           u8, bit 7: entries carry a checksum (never set here)
//	0x8F92EAB1 (LE u32)  seekable magic
//
// Part of the on-disk format: do not change.
const (
	seekSkippableMagic = 0x184D2A5E
	seekableMagic      = 0x8F92EAB1
	seekFooterSize     = 9
	// FrameBytes is the uncompressed size a data frame aims for; frames end
	// on line boundaries so each one holds whole lines.
	FrameBytes = 1 << 20
)

// frameBytes is the frame size WriteZst aims for; tests lower it to write
// many frames.
var frameBytes = FrameBytes

// ErrSeekTable is wrapped by readers of a .jsonl.zst whose seek table does not
// describe its frames.
var ErrSeekTable = errors.New("rollout: damaged zstd seek table")

// WriteZst compresses the JSONL read from src into dst as seekable zstd.
func WriteZst(dst io.Writer, src io.Reader) error {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	defer enc.Close()
	br := bufio.NewReaderSize(src, 1<<20)
	var table []byte
	var frames uint32
	chunk := make([]byte, 0, frameBytes+64<<10)
	var out []byte
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		out = enc.EncodeAll(chunk, out[:0])
		if _, err := dst.Write(out); err != nil {
			return err
		}
		table = binary.LittleEndian.AppendUint32(table, uint32(len(out)))
		table = binary.LittleEndian.AppendUint32(table, uint32(len(chunk)))
		frames++
		chunk = chunk[:0]
		return nil
	}
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long line: keep it whole, in one frame
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) > 0 {
			if len(chunk) > 0 && len(chunk)+len(line) > frameBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			chunk = append(chunk, line...)
			line = line[:0]
		}
		if err != nil {
			break
		}
	}
	if err := flush(); err != nil {
		return err
	}
	var sk []byte
	sk = binary.LittleEndian.AppendUint32(sk, seekSkippableMagic)
	sk = binary.LittleEndian.AppendUint32(sk, uint32(len(table)+seekFooterSize))
	sk = append(sk, table...)
	sk = binary.LittleEndian.AppendUint32(sk, frames)
	sk = append(sk, 0)
	sk = binary.LittleEndian.AppendUint32(sk, seekableMagic)
	_, err = dst.Write(sk)
	return err
}

type zstFrame struct {
	cOff, cSize int64 // compressed offset and size
	uOff, uSize int64 // uncompressed offset and size
}

// zstIndex is a seekable file's seek table, or nil for a plain zstd file.
type zstIndex struct {
	frames []zstFrame
	total  int64
}

// readSeekTable reads the seek table at the end of a compressed file of size
// n; it returns nil, nil when there is none.
func readSeekTable(ra io.ReaderAt, n int64) (*zstIndex, error) {
	if n < 8+seekFooterSize {
		return nil, nil
	}
	var foot [seekFooterSize]byte
	if _, err := ra.ReadAt(foot[:], n-seekFooterSize); err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint32(foot[5:]) != seekableMagic {
		return nil, nil
	}
	count := int64(binary.LittleEndian.Uint32(foot[0:]))
	entry := int64(8)
	if foot[4]&0x80 != 0 {
		entry = 12
	}
	tableSize := count*entry + seekFooterSize
	start := n - tableSize - 8
	if start < 0 {
		return nil, fmt.Errorf("%w: %d frames do not fit in %d bytes", ErrSeekTable, count, n)
	}
	buf := make([]byte, tableSize+8)
	if _, err := ra.ReadAt(buf, start); err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint32(buf) != seekSkippableMagic || int64(binary.LittleEndian.Uint32(buf[4:])) != tableSize {
		return nil, fmt.Errorf("%w: its header does not match its footer", ErrSeekTable)
	}
	idx := &zstIndex{}
	var cOff int64
	for i := int64(0); i < count; i++ {
		e := buf[8+i*entry:]
		f := zstFrame{cOff: cOff, cSize: int64(binary.LittleEndian.Uint32(e)), uOff: idx.total, uSize: int64(binary.LittleEndian.Uint32(e[4:]))}
		cOff += f.cSize
		idx.total += f.uSize
		idx.frames = append(idx.frames, f)
	}
	if cOff != start {
		return nil, fmt.Errorf("%w: it covers %d compressed bytes, the data frames hold %d", ErrSeekTable, cOff, start)
	}
	return idx, nil
}

// frameAt returns the index of the frame holding uncompressed offset off.
func (x *zstIndex) frameAt(off int64) int {
	return sort.Search(len(x.frames), func(i int) bool { return x.frames[i].uOff+x.frames[i].uSize > off })
}

// zstBlocks serves a seekable file's frames backward.
type zstBlocks struct {
	ra  io.ReaderAt
	idx *zstIndex
	dec *zstd.Decoder
}

func (s *zstBlocks) size() int64 { return s.idx.total }

func (s *zstBlocks) blockBefore(end int64) (int64, []byte, error) {
	i := s.idx.frameAt(end - 1)
	if i >= len(s.idx.frames) {
		return 0, nil, fmt.Errorf("%w: offset %d beyond its frames", ErrSeekTable, end)
	}
	f := s.idx.frames[i]
	comp := make([]byte, f.cSize)
	if _, err := s.ra.ReadAt(comp, f.cOff); err != nil {
		return 0, nil, err
	}
	data, err := s.dec.DecodeAll(comp, make([]byte, 0, f.uSize))
	if err != nil {
		return 0, nil, fmt.Errorf("zstd frame %d: %w", i, err)
	}
	if int64(len(data)) != f.uSize {
		return 0, nil, fmt.Errorf("%w: zstd frame %d holds %d bytes, the table says %d", ErrSeekTable, i, len(data), f.uSize)
	}
	return f.uOff, data[:end-f.uOff], nil
}
