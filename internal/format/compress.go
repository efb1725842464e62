package format

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression is how a checkpoint file is compressed. The name says it
// (.json, .json.gz, .json.zst), and readers detect it from the first bytes.
type Compression uint8

// The compressions a checkpoint may have: none (.json), gzip (.json.gz),
// zstd (.json.zst).
const (
	CompressNone Compression = iota
	CompressGzip
	CompressZstd
)

// Compressions lists every compression, in the order names are probed.
var Compressions = [...]Compression{CompressNone, CompressGzip, CompressZstd}

// Ext returns the file name extension of a checkpoint of this compression.
func (c Compression) Ext() string {
	switch c {
	case CompressGzip:
		return ExtGzip
	case CompressZstd:
		return ExtZstd
	}
	return ExtPlain
}

// String returns the value of Info.Compression: "gzip", "zstd", or "" for
// a plain file.
func (c Compression) String() string {
	switch c {
	case CompressGzip:
		return "gzip"
	case CompressZstd:
		return "zstd"
	}
	return ""
}

// GzipMagic and ZstdMagic are the first bytes of a gzip stream and of a
// zstd frame: readers detect a file's compression by them.
var (
	GzipMagic = []byte{0x1f, 0x8b}
	ZstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// Sniff tells the compression of a file from its first bytes. A zstd
// stream may begin with a skippable frame (magic 0x184D2A50 to 0x184D2A5F,
// little-endian), which tools use for metadata: it is zstd too.
func Sniff(magic []byte) Compression {
	switch {
	case bytes.HasPrefix(magic, GzipMagic):
		return CompressGzip
	case bytes.HasPrefix(magic, ZstdMagic):
		return CompressZstd
	case len(magic) >= 4 && binary.LittleEndian.Uint32(magic)&^0xf == zstdSkippableMagic:
		return CompressZstd
	}
	return CompressNone
}

// zstdSkippableMagic is the magic of a zstd skippable frame, less its low
// four bits, which may be anything.
const zstdSkippableMagic = 0x184D2A50

// Buffer sizes. The writer buffer sits between a compressor, which writes
// in small pieces, and the file; the reader buffer feeds a decompressor.
// A header is read through a buffer of its own size: List reads the header
// of every file in the directory, and a header is about 150 bytes (a few
// hundred with meta or an error record), so one small read covers it where
// a load's buffer would copy the first 32 KB of each file for nothing. A
// longer header takes more reads.
const (
	fileBufSize   = 64 << 10
	readBufSize   = 32 << 10
	headerBufSize = 1 << 10
)

// MaxPooled bounds what a codec keeps between calls, per value: a buffer
// of a larger capacity, or a zstd decoder of a window larger than
// ZstdWindow, is dropped after use, so that a store that once read a huge
// (or hostile) file does not hold its memory for as long as it is open.
const MaxPooled = 4 << 20

// ZstdWindow is the window of the zstd encoder, and the largest window of a
// zstd decoder a codec keeps for reuse. It is chosen so that such an
// encoder and such a decoder each keep less than MaxPooled, which an
// encoder of the default level's 8 MiB window does not, at no cost in ratio
// on JSON (see BENCHMARKS.md).
const ZstdWindow = 1 << 20

// MaxZstdWindow is the largest zstd window a read accepts. It covers every
// file this package writes (ZstdWindow; files of earlier releases used the
// default level's window, 8 MiB at most, sized to the file when the file
// was smaller) and the zstd tool's levels up to 19; only --ultra and --long
// ask for more. A frame that asks for more is refused before the decoder
// gives it memory: the window is memory a hostile file of a few hundred
// bytes could otherwise claim on top of the read limit.
const MaxZstdWindow = 8 << 20

// Codec turns states into checkpoint bytes and back for one store. It
// reuses its buffers, compressors and decompressors: for a small state,
// creating a gzip writer or a zstd encoder costs more than compressing (see
// the "reused compressor" rows of BENCHMARKS.md), and
// a fresh buffer per save would copy the encoded state again.
//
// What it reuses it keeps as spares, at most maxSpares of each kind and
// none larger than MaxPooled, which garbage collection does not empty (a
// sync.Pool would: with states of a few MiB, every few saves, throwing away
// a zstd encoder's tables or a state-sized buffer that the next save must
// grow again). Saves compress one at a time, under the store's write lock,
// so one spare encoder serves them; a store so keeps at most a few times
// MaxPooled, for as long as it lives. A larger state gets a fresh buffer,
// sized after the last state so that encoding does not grow it, and a file
// that asks for a larger zstd window a decoder of its own.
//
// A codec is safe for concurrent use.
type Codec struct {
	comp      Compression                     // what new checkpoints are written with
	MaxRead   int64                           // the most decompressed bytes a read accepts
	lastState atomic.Int64                    // the size of the last state encoded
	noStream  atomic.Bool                     // loads read the whole file first (see LoadState)
	plain     atomic.Pointer[plainVerdict]    // the last state type judged (see Streams)
	parallel  atomic.Pointer[parallelVerdict] // the last state type judged (see Parallel)

	buffers spares[*bytes.Buffer] // encoded states, whole files read
	writers spares[*bufio.Writer]
	readers spares[*bufio.Reader]
	headers spares[*bufio.Reader] // of headerBufSize
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

// NewCodec returns a codec writing comp and reading at most maxRead
// decompressed bytes of a file; maxRead is at most MaxReadCeiling.
func NewCodec(comp Compression, maxRead int64) *Codec {
	return &Codec{comp: comp, MaxRead: min(maxRead, MaxReadCeiling)}
}

func (c *Codec) getBuffer() *bytes.Buffer {
	if b, ok := c.buffers.get(); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// PutBuffer gives back a buffer EncodeState returned, once its bytes are
// written: the codec may reuse it.
func (c *Codec) PutBuffer(b *bytes.Buffer) {
	if b != nil && b.Cap() <= MaxPooled {
		c.buffers.put(b)
	}
}

// EncodeState encodes an application state into a pooled buffer; return it
// with PutBuffer once written. The bytes are exactly what json.Marshal
// returns: they are what the checksum covers and what a load decodes. A
// nil state encodes as null, which loads back into a type that can be nil
// (see Nilable): the store refuses it for other types.
func (c *Codec) EncodeState(v any) (*bytes.Buffer, error) {
	var buf *bytes.Buffer
	if n := c.lastState.Load(); n > MaxPooled {
		// A state too large to keep a buffer for: a buffer the size of
		// the last one and a little, which encoding rarely has to grow
		// (each growth would copy the state and double the buffer).
		buf = bytes.NewBuffer(make([]byte, 0, n+n/8))
	} else {
		buf = c.getBuffer()
	}
	if err := c.encodeState(buf, v, false); err != nil {
		c.PutBuffer(buf)
		return nil, err
	}
	c.lastState.Store(int64(buf.Len()))
	return buf, nil
}

// WriteEnvelope writes a whole checkpoint to w, compressed as the codec
// says. The state is hashed and written where it lies: it is not copied.
func (c *Codec) WriteEnvelope(w io.Writer, h Header, state []byte) error {
	head, err := envelopeHead(h)
	if err != nil {
		return err
	}
	t := TrailerOf(h.Format)
	sum := t.Sum()
	sum.Write(head)
	sum.Write(state)
	var tb [maxTrailerLen]byte
	tail := AppendTrailer(tb[:0], t, sum)
	if c.comp == CompressNone {
		return writeParts(w, [][]byte{head, state, tail})
	}
	// The content size goes into a zstd frame's header: the window is
	// sized to the file and the decoder can check the length.
	return c.compressTo(w, int64(len(head)+len(state)+len(tail)), func(zw io.Writer) error {
		return writeParts(zw, [][]byte{head, state, tail})
	})
}

// WriteStateEnvelope writes a whole checkpoint of the state v to w, as
// WriteEnvelope writes one of v's encoding, but encodes v as it writes:
// no buffer holds the state's bytes, which are hashed on their way out (a
// zstd frame so declares no content size). v's type must be one that
// Parallel admits, whose encoding runs none of the host's code: the store
// calls this under its write lock. An encoding error is ErrInvalid, as
// from EncodeState, and so is a state larger than a load of this codec
// reads (see CheckFits), found once that many bytes are written; either
// ends the write, whose file the backend then does not publish.
func (c *Codec) WriteStateEnvelope(w io.Writer, h Header, v any) error {
	head, err := envelopeHead(h)
	if err != nil {
		return err
	}
	t := TrailerOf(h.Format)
	return c.compressTo(w, -1, func(zw io.Writer) error {
		hw := hashWriter{w: zw, sum: t.Sum(), limit: c.MaxRead, h: h, c: c}
		if _, err := hw.Write(head); err != nil {
			return err
		}
		hw.n = 0 // the state's bytes count from here
		if err := c.encodeState(&hw, v, true); err != nil {
			return err
		}
		if err := c.CheckFits(h, int(hw.n)); err != nil {
			return err
		}
		c.lastState.Store(hw.n)
		var tb [maxTrailerLen]byte
		_, err := zw.Write(AppendTrailer(tb[:0], t, hw.sum))
		return err
	})
}

// envelopeHead returns the envelope's bytes up to the state: the header
// object, reopened for the state's key.
func envelopeHead(h Header) ([]byte, error) {
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	return append(head[:len(head)-1], `,"state":`...), nil
}

// hashWriter hashes what it writes to w and counts it; past limit bytes
// it refuses to write more, with CheckFits' error for h.
type hashWriter struct {
	w     io.Writer
	sum   hash.Hash
	n     int64
	limit int64
	h     Header
	c     *Codec
}

func (hw *hashWriter) Write(b []byte) (int, error) {
	if hw.n += int64(len(b)); hw.n > hw.limit {
		return 0, hw.c.CheckFits(hw.h, int(min(hw.n, math.MaxInt)))
	}
	hw.sum.Write(b)
	return hw.w.Write(b)
}

func newGzipWriter(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }

// zstdEncoder returns a spare zstd encoder, or a new one: goroutine-free,
// at the default level, of a ZstdWindow window, allocating it as the data
// needs it. Give it back with c.zstdW.put.
func (c *Codec) zstdEncoder() (*zstd.Encoder, error) {
	if ze, ok := c.zstdW.get(); ok {
		return ze, nil
	}
	ze, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(ZstdWindow))
	if err != nil {
		return nil, fmt.Errorf("create zstd encoder: %w", err)
	}
	return ze, nil
}

func writeParts(w io.Writer, parts [][]byte) error {
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func (c *Codec) getWriter(w io.Writer) *bufio.Writer {
	if bw, ok := c.writers.get(); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, fileBufSize)
}

// Open returns a reader of r's decompressed bytes, detecting the compression
// from the magic number (not the name), the compression found, and a
// function that returns the reader's resources to the codec once the caller
// is done with it. It reads through a buffer sized for a header.
func (c *Codec) Open(r io.Reader) (io.Reader, Compression, func(), error) {
	st, err := c.openBuffered(r, -1, &c.headers, headerBufSize)
	return st.r, st.comp, st.release, err
}

// stream is a file's decompressed bytes being read.
type stream struct {
	r       io.Reader
	comp    Compression
	hint    int64  // the decompressed size the file declares; -1 if unknown
	release func() // returns the stream's resources to the codec
}

// openStream opens r, a file of size bytes on disk (-1 if unknown), like
// open, and finds how large its decompressed bytes say they are: a plain
// file's size, a zstd frame's content size, a gzip file's size trailer. A
// hint is only a hint (a hostile file may lie): it is never more than the
// read limit, and a read never trusts it beyond sizing its first buffer.
func (c *Codec) openStream(r io.Reader, size int64) (stream, error) {
	return c.openBuffered(r, size, &c.readers, readBufSize)
}

// openBuffered is openStream reading r through a buffer of bufSize bytes
// from readers.
func (c *Codec) openBuffered(r io.Reader, size int64, readers *spares[*bufio.Reader], bufSize int) (stream, error) {
	br, ok := readers.get()
	if ok {
		br.Reset(r)
	} else {
		br = bufio.NewReaderSize(r, bufSize)
	}
	releaseBuf := func() { br.Reset(nil); readers.put(br) }
	fail := func(err error) (stream, error) {
		releaseBuf()
		return stream{}, err
	}
	magic, err := br.Peek(SealedLen)
	if err != nil && err != io.EOF {
		return fail(corruptIO(err))
	}
	if err := Sealed(magic); err != nil {
		return fail(err)
	}
	st := stream{comp: Sniff(magic), hint: -1}
	switch st.comp {
	case CompressNone:
		st.r, st.release = br, releaseBuf
		if size >= 0 {
			st.hint = size
		}
	case CompressGzip:
		zr, ok := c.gzipR.get()
		if ok {
			err = zr.Reset(br)
		} else {
			zr, err = gzip.NewReader(br)
		}
		if err != nil {
			return fail(corruptIO(fmt.Errorf("gzip header: %w", err)))
		}
		st.r, st.release = zr, func() { c.gzipR.put(zr); releaseBuf() }
		st.hint = gzipSize(r, size)
	case CompressZstd:
		window, content, err := zstdFrame(br)
		if err != nil {
			return fail(err)
		}
		// The most any file within the limit holds: a byte payload of
		// MaxRead bytes with its header and trailer (a state's file is
		// held to MaxRead by its own reads).
		if most := c.MaxRead + int64(MaxHeaderSize+TrailerLenV2); content > most {
			return fail(fmt.Errorf("%w: %w: the zstd frame holds %d bytes, more than the %d of a file whose payload is within the limit of %d (see WithMaxReadSize)", ErrCorrupt, ErrTooLarge, content, most, c.MaxRead))
		}
		st.hint = content
		// A frame of a small window is decoded by a spare decoder that
		// refuses larger windows in the frames that follow, so that what
		// is kept stays small; a larger one by a decoder of its own.
		small := window <= ZstdWindow
		var zr *zstd.Decoder
		ok := false
		if small {
			zr, ok = c.zstdR.get()
		}
		if !ok {
			limit := uint64(MaxZstdWindow)
			if small {
				limit = ZstdWindow
			}
			// One goroutine-free decoder. The content of a
			// single-segment frame is its window: WithDecoderMaxMemory
			// bounds that one.
			zr, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(limit), zstd.WithDecoderMaxMemory(limit))
			if err != nil {
				return fail(fmt.Errorf("create zstd decoder: %w", err))
			}
		}
		keep := func() {
			if small {
				zr.Reset(nil)
				c.zstdR.put(zr)
			} else {
				zr.Close()
			}
		}
		if err := zr.Reset(br); err != nil {
			keep()
			return fail(corruptIO(fmt.Errorf("zstd: %w", err)))
		}
		st.r = zr
		st.release = func() { keep(); releaseBuf() }
	}
	return st, nil
}

// zstdFrame reads the header of the zstd frame at the start of br without
// consuming it and returns the frame's window (the memory a decoder keeps
// for it) and its declared content size (-1 if it declares none). A window
// larger than MaxZstdWindow is refused: the file may be good, but this
// package does not give it that memory.
func zstdFrame(br *bufio.Reader) (window, content int64, err error) {
	head, _ := br.Peek(zstd.HeaderMaxSize)
	var h zstd.Header
	if err := h.Decode(head); err != nil {
		return 0, 0, corruptIO(fmt.Errorf("zstd frame header: %w", err))
	}
	content = -1
	if h.HasFCS {
		content = int64(min(h.FrameContentSize, math.MaxInt64))
	}
	w := h.WindowSize
	switch {
	case h.Skippable:
		// The frames after it are not known yet: they may ask for
		// any window up to the cap, which the decoder then enforces.
		return MaxZstdWindow, -1, nil
	case h.SingleSegment:
		w = h.FrameContentSize // the decoder's window is the content
	}
	if w > MaxZstdWindow {
		return 0, 0, fmt.Errorf("%w: %w: the zstd frame asks for a window of %d bytes; this package decodes windows of up to %d", ErrCorrupt, ErrUnsupported, w, MaxZstdWindow)
	}
	return int64(w), content, nil
}

// gzipSize returns what the size trailer of the last gzip member of r, a
// file of size bytes, says (-1 if r cannot be read at an offset): the
// decompressed size of a file of one member smaller than 4 GiB, which is
// every file this package writes.
func gzipSize(r io.Reader, size int64) int64 {
	ra, ok := r.(io.ReaderAt)
	if !ok || size < 18 { // the smallest gzip member
		return -1
	}
	var isize [4]byte
	if _, err := ra.ReadAt(isize[:], size-4); err != nil {
		return -1
	}
	return int64(binary.LittleEndian.Uint32(isize[:]))
}

// Read reads a whole checkpoint from r, whose size on disk is size (or -1
// if unknown), reading at most maxRead decompressed bytes; verifies its
// checksum and header; and calls use with the header and the state's exact
// bytes, which are valid only during the call. It returns an ErrCorrupt
// error for anything wrong with the bytes (marked as damage when it proves
// the file damaged: see IsDamage), an operating system error as it is, and
// use's error. A byte payload (format 3) is not read into memory: it is
// verified as it streams, whatever its size (its payload bounded by the
// read limit), and use gets its header and a nil state.
func (c *Codec) Read(r io.Reader, size int64, use func(h Header, state []byte) error) error {
	st, err := c.openStream(r, size)
	if err != nil {
		return err
	}
	hb := make([]byte, 0, headerBufSize)
	h, data, keyEnd, long, err := readHeader(st.r, hb)
	if err == nil && !long && IsPayload(h.Format) {
		// A byte payload is verified as it streams, whatever its size:
		// use gets no bytes.
		p := newPayloadReader(st, data, keyEnd, c.MaxRead)
		defer p.Close()
		if _, err := p.VerifyPayload(); err != nil {
			return err
		}
		return use(h, nil)
	}
	defer st.release()
	return c.readOpened(io.MultiReader(bytes.NewReader(data), st.r), st, use)
}

// readOpened is read of the stream st, whose decompressed bytes r reads
// (st.r, or what is left of it after bytes read before).
func (c *Codec) readOpened(r io.Reader, st stream, use func(h Header, state []byte) error) error {
	tooLarge := fmt.Errorf("%w: %w of %d bytes (see WithMaxReadSize)", ErrCorrupt, ErrTooLarge, c.MaxRead)
	if st.hint > c.MaxRead {
		if st.comp == CompressNone {
			return tooLarge // a plain file's size is its data's
		}
		st.hint = -1 // a compressed file's size trailer may lie
	}
	// The bytes go first to a pooled buffer, or to one of the declared
	// size if that is larger than the pool keeps. Room for a byte more
	// tells a file that grew since it was stat'ed (or a size that lied)
	// without growing the buffer at the end.
	buf := c.getBuffer()
	defer c.PutBuffer(buf)
	var first []byte
	if want := int(max(st.hint, readBufSize-1)) + 1; want <= MaxPooled {
		buf.Grow(want)
		first = buf.AvailableBuffer()
	} else {
		first = make([]byte, 0, want)
	}
	data, err := ReadLimited(r, first, c.MaxRead)
	if errors.Is(err, ErrTooLarge) {
		return tooLarge
	}
	if err != nil {
		return corruptIO(err)
	}
	h, state, err := ParseEnvelope(data)
	if err != nil {
		collectLarge(int64(len(data)))
		return err
	}
	return use(h, state)
}

// CollectAfter is the size of a failed read past which its memory is
// collected before the read returns (see collectLarge).
const CollectAfter = 16 << 20

// collectLarge runs a garbage collection if a read that failed (a bomb, a
// damaged file) took n bytes, more than CollectAfter, which are garbage now.
// Otherwise the collector, paced by the heap it found live while that read
// ran, lets the next read (Latest or verify walking past several bombs)
// take as much again on top: twice the read limit and more, where a read
// may cost the limit and a few MiB. A collection costs little beside
// decompressing that much.
func collectLarge(n int64) {
	if n > CollectAfter {
		runtime.GC()
	}
}

// minChunk is the smallest piece ReadLimited reads into past its first
// buffer.
const minChunk = 64 << 10

// ReadLimited reads r to its end and returns its bytes, or ErrTooLarge as
// soon as more than limit bytes come. The bytes go to first (up to its
// capacity) and past it to chunks that double the bytes read so far, never
// more than limit+1 bytes in all: a stream without end, a decompression
// bomb, costs at most the limit and a chunk of memory before it is refused,
// where the doubling of one growing buffer would cost half as much again
// (the old buffer and the new one, while it is copied). A stream that
// needed chunks is copied into one slice of its exact size at its end.
func ReadLimited(r io.Reader, first []byte, limit int64) ([]byte, error) {
	buf := first[:0:min(int64(cap(first)), limit+1)]
	var full [][]byte
	var total int64 // bytes in full
	fail := func(err error) ([]byte, error) {
		n := total + int64(len(buf))
		full, buf = nil, nil
		collectLarge(n)
		return nil, err
	}
	for {
		if len(buf) == cap(buf) {
			total += int64(len(buf))
			if total > limit {
				total -= int64(len(buf)) // counted again by fail
				return fail(ErrTooLarge)
			}
			if len(buf) > 0 {
				full = append(full, buf)
			}
			buf = make([]byte, 0, min(max(total, minChunk), limit+1-total))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
	}
	if total+int64(len(buf)) > limit {
		return fail(ErrTooLarge)
	}
	if len(full) == 0 {
		return buf, nil
	}
	out := make([]byte, 0, total+int64(len(buf)))
	for i, b := range full {
		out = append(out, b...)
		full[i] = nil // garbage as soon as the collector runs
	}
	return append(out, buf...), nil
}

// ReadHeader decodes the header of a checkpoint without reading its state:
// it decompresses and parses only up to the "state" key. Nothing is
// verified; a load does that.
func (c *Codec) ReadHeader(r io.Reader) (Header, error) {
	ur, _, release, err := c.Open(r)
	if err != nil {
		return Header{}, err
	}
	defer release()
	h, _, _, long, err := readHeader(ur, make([]byte, 0, headerBufSize))
	if long {
		return h, corruptIO(fmt.Errorf("header longer than %d bytes: %w", MaxHeaderSize, io.ErrUnexpectedEOF))
	}
	return h, err
}

// readHeader reads the first bytes of a decompressed checkpoint from r
// into buf until ParseHeader finds the whole header, and returns the
// header, the bytes read (buf, grown) and the offset just after the
// "state" key in them. One read of a kilobyte covers most headers; a
// longer one doubles buf, up to MaxHeaderSize: past it, long is true and
// err nil. An error of r is returned through corruptIO; bytes that end
// before the header does are damage ("no state"), as in ParseEnvelope.
func readHeader(r io.Reader, buf []byte) (h Header, data []byte, keyEnd int, long bool, err error) {
	for {
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		h, keyEnd, err = ParseHeader(buf)
		if !errors.Is(err, ErrShortHeader) {
			return h, buf, keyEnd, false, err
		}
		switch {
		case rerr == io.EOF:
			return h, buf, 0, false, Damaged("no state")
		case rerr != nil:
			return h, buf, 0, false, corruptIO(rerr)
		case len(buf) == cap(buf):
			if len(buf) >= MaxHeaderSize {
				return h, buf, 0, true, nil
			}
			buf = slices.Grow(buf, len(buf))
		}
	}
}

// Compression returns the compression the codec writes new checkpoints with.
func (c *Codec) Compression() Compression { return c.comp }

// IdleBufferCaps returns the capacities of the buffers the codec keeps for
// reuse: each is at most MaxPooled. Tests measure what a store holds with it.
func (c *Codec) IdleBufferCaps() []int {
	c.buffers.mu.Lock()
	defer c.buffers.mu.Unlock()
	caps := make([]int, len(c.buffers.idle))
	for i, b := range c.buffers.idle {
		caps[i] = b.Cap()
	}
	return caps
}
