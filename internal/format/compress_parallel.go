package format

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/flate"
)

// Compressing a checkpoint on several cores.
//
// Compression is most of a compressed save's work: at 100 KB, several
// times the encoding. A checkpoint whose bytes are in memory is cut into
// as many pieces as there are cores (at most maxCompressors), each
// compressed on its own goroutine, and the pieces' outputs are written in
// order as one standard file:
//   - gzip: one member whose deflate stream is the pieces' streams, each
//     ended by a sync flush (byte-aligned, not final) but the last; each
//     piece is compressed with the 32 KiB before it as its dictionary, so
//     that it finds the matches one stream would have found. Any gzip
//     reader reads it.
//   - zstd: one frame per piece, each declaring its content size; a zstd
//     reader reads concatenated frames as one stream. A frame does not see
//     the pieces before it, which costs a little in size.
//
// The compressor, its level and its window are those of one goroutine's
// compression.

// parallelCompressMin is the size of a checkpoint below which it is
// compressed on one goroutine.
const parallelCompressMin = 8 << 10

// maxCompressors bounds the pieces of a checkpoint: the compressors a codec
// keeps for reuse (maxSpares of each kind) are up to a few MiB each, and
// one created for a save costs more than compressing a small checkpoint.
const maxCompressors = maxSpares

// flateDict is the dictionary a gzip piece starts with: deflate's window.
const flateDict = 32 << 10

// gzipHeader is a gzip member's header as this package writes it: deflate,
// no flags, no time, unknown OS.
var gzipHeader = [10]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}

// piece is one piece of a checkpoint being compressed: the bytes of its
// parts from offset from to offset to, and what compressing them made.
type piece struct {
	from, to int
	out      *bytes.Buffer
	err      error
}

// compressParallel writes the checkpoint made of parts, compressed as the
// codec says, on several goroutines; it returns false, having written
// nothing, where the checkpoint is too small to gain from it or there is
// one core.
func (c *Codec) compressParallel(w io.Writer, parts [][]byte) (bool, error) {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	n := min(runtime.GOMAXPROCS(0), maxCompressors, total/(parallelCompressMin/2))
	if c.comp == CompressNone || total < parallelCompressMin || n < 2 {
		return false, nil
	}
	pieces := make([]piece, n)
	for i := range pieces {
		pieces[i] = piece{from: total * i / n, to: total * (i + 1) / n, out: partBuffers.Get().(*bytes.Buffer)}
		pieces[i].out.Reset()
	}
	defer func() {
		for _, p := range pieces {
			if p.out.Cap() <= maxPartBuffer {
				partBuffers.Put(p.out)
			}
		}
	}()
	compress := c.zstdPiece
	if c.comp == CompressGzip {
		compress = c.flatePiece
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() {
			p := &pieces[i]
			p.err = compress(p.out, parts, p.from, p.to, i == n-1)
		})
	}
	pieces[0].err = compress(pieces[0].out, parts, pieces[0].from, pieces[0].to, n == 1)
	wg.Wait()
	for _, p := range pieces {
		if p.err != nil {
			return true, p.err
		}
	}
	if c.comp == CompressGzip {
		if _, err := w.Write(gzipHeader[:]); err != nil {
			return true, err
		}
	}
	for _, p := range pieces {
		if _, err := w.Write(p.out.Bytes()); err != nil {
			return true, err
		}
	}
	if c.comp == CompressGzip {
		var sum uint32
		for _, p := range parts {
			sum = crc32.Update(sum, crc32.IEEETable, p)
		}
		var trailer [8]byte
		binary.LittleEndian.PutUint32(trailer[:4], sum)
		binary.LittleEndian.PutUint32(trailer[4:], uint32(total))
		if _, err := w.Write(trailer[:]); err != nil {
			return true, err
		}
	}
	return true, nil
}

// span calls write with the bytes of parts from offset from to offset to,
// in order, in as many calls as parts they lie in.
func span(parts [][]byte, from, to int, write func([]byte) error) error {
	off := 0
	for _, p := range parts {
		lo, hi := max(from-off, 0), min(to-off, len(p))
		if lo < hi {
			if err := write(p[lo:hi]); err != nil {
				return err
			}
		}
		off += len(p)
	}
	return nil
}

// flatePiece deflates the bytes from..to of parts into out, with the
// flateDict bytes before them as its dictionary, ending with a sync flush,
// or (last) with the stream's final block.
func (c *Codec) flatePiece(out *bytes.Buffer, parts [][]byte, from, to int, last bool) error {
	var dict []byte
	if from > 0 {
		// Where the bytes before the piece lie in one part (the state),
		// they are the dictionary where they are.
		start := max(0, from-flateDict)
		span(parts, start, from, func(b []byte) error {
			if dict == nil && len(b) == from-start {
				dict = b
			} else {
				dict = append(dict[:len(dict):len(dict)], b...)
			}
			return nil
		})
	}
	fw, ok := c.flateW.get()
	if ok {
		fw.ResetDict(out, dict)
	} else {
		var err error
		if fw, err = flate.NewWriterDict(out, flate.DefaultCompression, dict); err != nil {
			return err
		}
	}
	defer func() { fw.ResetDict(nil, nil); c.flateW.put(fw) }()
	if err := span(parts, from, to, func(b []byte) error { _, err := fw.Write(b); return err }); err != nil {
		return err
	}
	if last {
		return fw.Close()
	}
	return fw.Flush()
}

// zstdPiece compresses the bytes from..to of parts into out as one zstd
// frame of its own.
func (c *Codec) zstdPiece(out *bytes.Buffer, parts [][]byte, from, to int, _ bool) error {
	ze, err := c.zstdEncoder()
	if err != nil {
		return err
	}
	defer func() { ze.Reset(nil); c.zstdW.put(ze) }()
	ze.ResetContentSize(out, int64(to-from))
	if err := span(parts, from, to, func(b []byte) error { _, err := ze.Write(b); return err }); err != nil {
		return err
	}
	return ze.Close()
}
