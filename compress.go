package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// compression is how a checkpoint file is compressed. The name says it
// (.json, .json.gz, .json.zst), and readers detect it from the first bytes.
type compression uint8

const (
	compressNone compression = iota
	compressGzip
	compressZstd
)

// compressions lists every compression, in the order names are probed.
var compressions = [...]compression{compressNone, compressGzip, compressZstd}

// ext returns the file name extension of a checkpoint of this compression.
func (c compression) ext() string {
	switch c {
	case compressGzip:
		return extGzip
	case compressZstd:
		return extZstd
	}
	return extPlain
}

// String returns the value of Info.Compression: "gzip", "zstd", or "" for
// a plain file.
func (c compression) String() string {
	switch c {
	case compressGzip:
		return "gzip"
	case compressZstd:
		return "zstd"
	}
	return ""
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// sniff tells the compression of a file from its first bytes.
func sniff(magic []byte) compression {
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		return compressGzip
	case bytes.HasPrefix(magic, zstdMagic):
		return compressZstd
	}
	return compressNone
}

// Buffer sizes. The writer buffer sits between a compressor, which writes
// in small pieces, and the file; the reader buffer feeds a decompressor.
const (
	fileBufSize = 64 << 10
	readBufSize = 32 << 10
)

// codec turns states into checkpoint bytes and back for one store. It
// reuses its buffers, compressors and decompressors: at a 10 KB state,
// creating a gzip writer or a zstd encoder costs more than compressing, and
// a fresh buffer per save would copy the encoded state again.
//
// What it reuses it keeps as spares, at most maxSpares of each kind, which
// garbage collection does not empty (a sync.Pool would: with large states,
// every few saves, throwing away a zstd encoder's megabytes of tables or a
// state-sized buffer that the next save must grow again). Saves compress one
// at a time, under the store's write lock, so one spare encoder serves them;
// a store so keeps about two states' worth of buffers and one compressor of
// each kind it uses, for as long as it lives.
//
// A codec is safe for concurrent use.
type codec struct {
	comp      compression // what new checkpoints are written with
	maxRead   int64       // the most decompressed bytes a read accepts
	maxWindow uint64      // the largest zstd window a read accepts

	buffers spares[*bytes.Buffer] // encoded states, whole files read
	writers spares[*bufio.Writer]
	readers spares[*bufio.Reader]
	gzipW   spares[*gzip.Writer]
	gzipR   spares[*gzip.Reader]
	zstdW   spares[*zstd.Encoder]
	zstdR   spares[*zstd.Decoder]
}

// spares keeps a few idle values for reuse.
type spares[V any] struct {
	mu   sync.Mutex
	idle []V
}

// maxSpares bounds the idle values of one kind a codec keeps: one for the
// writer, one for a reader beside it. More concurrent users create values
// that are dropped after use.
const maxSpares = 2

func (p *spares[V]) get() (V, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var v V
	if n := len(p.idle); n > 0 {
		v = p.idle[n-1]
		p.idle = p.idle[:n-1]
		return v, true
	}
	return v, false
}

func (p *spares[V]) put(v V) {
	p.mu.Lock()
	if len(p.idle) < maxSpares {
		p.idle = append(p.idle, v)
	}
	p.mu.Unlock()
}

func newCodec(comp compression, maxRead int64) *codec {
	// A legitimate zstd frame's window is at most twice its content (the
	// encoder rounds up to a power of two), and the content of a
	// checkpoint that may be read is at most maxRead bytes: a frame
	// that asks for more is refused before any memory is given to it.
	window := uint64(zstd.MaxWindowSize)
	if maxRead < int64(window)/2 {
		window = max(uint64(2*maxRead), 1<<20)
	}
	return &codec{comp: comp, maxRead: maxRead, maxWindow: window}
}

func (c *codec) getBuffer() *bytes.Buffer {
	if b, ok := c.buffers.get(); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func (c *codec) putBuffer(b *bytes.Buffer) {
	if b != nil {
		c.buffers.put(b)
	}
}

// encodeState encodes an application state into a pooled buffer; return it
// with putBuffer once written. The bytes are exactly what json.Marshal
// returns: they are what the checksum covers and what a load decodes.
func (c *codec) encodeState(v any) (*bytes.Buffer, error) {
	buf := c.getBuffer()
	enc := json.NewEncoder(buf)
	if err := enc.Encode(v); err != nil {
		c.putBuffer(buf)
		return nil, fmt.Errorf("%w: encode state: %w", ErrInvalid, err)
	}
	buf.Truncate(buf.Len() - 1) // Encode ends the value with a newline
	if bytes.Equal(buf.Bytes(), []byte("null")) {
		c.putBuffer(buf)
		return nil, fmt.Errorf("%w: encode state: the state is nil", ErrInvalid)
	}
	return buf, nil
}

// writeEnvelope writes a whole checkpoint to w, compressed as the codec
// says. The state is hashed and written where it lies: it is not copied.
func (c *codec) writeEnvelope(w io.Writer, h header, state []byte) error {
	head, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode header: %w", err)
	}
	// Reopen the header object to append the state and the trailer.
	head = append(head[:len(head)-1], `,"state":`...)
	sum := sha256.New()
	sum.Write(head)
	sum.Write(state)
	var tb [trailerLen]byte
	trailer := appendTrailer(tb[:0], sum)
	if c.comp == compressNone {
		return writeParts(w, [][]byte{head, state, trailer})
	}

	bw := c.getWriter(w)
	defer func() { bw.Reset(nil); c.writers.put(bw) }()
	var zw io.WriteCloser
	switch c.comp {
	case compressGzip:
		gw, ok := c.gzipW.get()
		if !ok {
			gw = gzip.NewWriter(bw)
		} else {
			gw.Reset(bw)
		}
		defer func() { gw.Reset(nil); c.gzipW.put(gw) }()
		zw = gw
	case compressZstd:
		ze, ok := c.zstdW.get()
		if !ok {
			// One goroutine-free encoder at the default level, allocating
			// its window as the data needs it.
			if ze, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true)); err != nil {
				return fmt.Errorf("create zstd encoder: %w", err)
			}
		}
		// The content size goes into the frame header: the window is
		// sized to the file and the decoder can check the length.
		ze.ResetContentSize(bw, int64(len(head)+len(state)+len(trailer)))
		defer func() { ze.Reset(nil); c.zstdW.put(ze) }()
		zw = ze
	}
	if err := writeParts(zw, [][]byte{head, state, trailer}); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func writeParts(w io.Writer, parts [][]byte) error {
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func (c *codec) getWriter(w io.Writer) *bufio.Writer {
	if bw, ok := c.writers.get(); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, fileBufSize)
}

// open returns a reader of r's decompressed bytes, detecting the compression
// from the magic number (not the name), the compression found, and a
// function that returns the reader's resources to the codec once the caller
// is done with it.
func (c *codec) open(r io.Reader) (io.Reader, compression, func(), error) {
	br, ok := c.readers.get()
	if ok {
		br.Reset(r)
	} else {
		br = bufio.NewReaderSize(r, readBufSize)
	}
	releaseBuf := func() { br.Reset(nil); c.readers.put(br) }
	magic, err := br.Peek(len(zstdMagic))
	if err != nil && err != io.EOF {
		releaseBuf()
		return nil, 0, nil, corruptIO(err)
	}
	comp := sniff(magic)
	switch comp {
	case compressGzip:
		zr, ok := c.gzipR.get()
		if ok {
			err = zr.Reset(br)
		} else {
			zr, err = gzip.NewReader(br)
		}
		if err != nil {
			releaseBuf()
			return nil, 0, nil, corruptIO(fmt.Errorf("gzip header: %w", err))
		}
		return zr, comp, func() { c.gzipR.put(zr); releaseBuf() }, nil
	case compressZstd:
		zr, ok := c.zstdR.get()
		if !ok {
			// One goroutine-free decoder, refusing windows no
			// checkpoint under the read limit needs.
			zr, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(c.maxWindow))
			if err != nil {
				releaseBuf()
				return nil, 0, nil, fmt.Errorf("create zstd decoder: %w", err)
			}
		}
		if err := zr.Reset(br); err != nil {
			releaseBuf()
			return nil, 0, nil, corruptIO(fmt.Errorf("zstd: %w", err))
		}
		return zr, comp, func() { zr.Reset(nil); c.zstdR.put(zr); releaseBuf() }, nil
	}
	return br, comp, releaseBuf, nil
}

// read reads a whole checkpoint from r, whose size on disk is size (or -1
// if unknown), reading at most maxRead decompressed bytes; verifies its
// checksum and header; and calls use with the header and the state's exact
// bytes, which are valid only during the call. It returns an ErrCorrupt
// error for anything wrong with the bytes, an operating system error as it
// is, and use's error.
func (c *codec) read(r io.Reader, size int64, use func(h header, state []byte) error) error {
	ur, comp, release, err := c.open(r)
	if err != nil {
		return err
	}
	defer release()
	buf := c.getBuffer()
	defer c.putBuffer(buf)
	if size >= 0 && comp == compressNone {
		// A plain file: its size is the size of the data.
		if size > c.maxRead {
			return fmt.Errorf("%w: %w of %d bytes (see WithMaxReadSize)", ErrCorrupt, errTooLarge, c.maxRead)
		}
		// Room for a byte more tells a file that grew since it was
		// stat'ed, without growing the buffer at the end.
		buf.Grow(int(size) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(ur, c.maxRead+1)); err != nil {
		return corruptIO(err)
	}
	if int64(buf.Len()) > c.maxRead {
		return fmt.Errorf("%w: %w of %d bytes (see WithMaxReadSize)", ErrCorrupt, errTooLarge, c.maxRead)
	}
	h, state, err := parseEnvelope(buf.Bytes())
	if err != nil {
		return err
	}
	return use(h, state)
}

// readHeader decodes the header of a checkpoint without reading its state:
// it decompresses and parses only up to the "state" key. Nothing is
// verified; a load does that.
func (c *codec) readHeader(r io.Reader) (header, error) {
	ur, _, release, err := c.open(r)
	if err != nil {
		return header{}, err
	}
	defer release()
	h, _, err := decodeHeader(json.NewDecoder(io.LimitReader(ur, maxHeaderSize)))
	return h, err
}
