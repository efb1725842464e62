package format

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
)

// A byte payload is a checkpoint whose payload is opaque bytes instead of a
// JSON state: the envelope of format PayloadVersion. It is the envelope of
// format 2 with the payload's raw bytes where the state's JSON would be:
//
//	{"format":3,"step":7,"kind":"step","time":"...","state":<the payload's bytes>,"checksum":"crc32c:<8 hex digits>"}\n
//
// The header is the one every envelope has, decoded by the one header
// decoder (ParseHeader); the payload is every byte after the colon of the
// "state" key up to the trailer, which is format 2's and closes the file:
// since the trailer has a fixed length, the payload needs no length and no
// escaping, and it is written and read as a stream. The CRC-32C covers every
// byte before the trailer, as in format 2. Compression wraps the whole file,
// as it does a JSON state's.
//
// The file is no JSON document (the payload is not a JSON value), but its
// header is, and a reader of format 2 (a release before this one) finds the
// header, sees format 3 and refuses the file as a newer format (ErrFormat),
// which is never proof of damage: it does not move the file aside.

// PayloadVersion is the format of the envelope of a byte payload.
const PayloadVersion = 3

// PayloadPrefix is how every envelope of a byte payload that this package
// writes begins (see StreamPrefix).
const PayloadPrefix = `{"format":3,`

// IsPayload reports whether an envelope of format v holds a byte payload.
func IsPayload(format int) bool { return format == PayloadVersion }

// ErrPayloadMismatch marks a checkpoint whose payload is of another kind
// than the read asked for: a byte payload where a JSON state was to be
// decoded, or a JSON state where a byte payload was to be read. It is
// returned only for a file that verified: it is no damage.
var ErrPayloadMismatch = errors.New("checkpoint holds another kind of payload")

// WritePayload writes to w the checkpoint of header h, whose format must
// be PayloadVersion, with the bytes write writes as its payload,
// compressed as the codec says, and returns the payload's size. The
// payload streams: what write writes is hashed, compressed and passed on
// in pieces of at most a few tens of KiB, whatever its size. A payload of
// more bytes than the codec's read limit, which no read could take back,
// fails the write with an error wrapping ErrInvalid, as does a panic in
// write (the error wraps its value); write's own error is returned as it
// is. The io.Writer given to write must not be used after write returns,
// nor by several goroutines at once.
func (c *Codec) WritePayload(w io.Writer, h Header, write func(io.Writer) error) (int64, error) {
	if !IsPayload(h.Format) {
		return 0, fmt.Errorf("%w: a byte payload in an envelope of format %d", ErrInvalid, h.Format)
	}
	head, err := json.Marshal(h)
	if err != nil {
		return 0, fmt.Errorf("encode header: %w", err)
	}
	head = append(head[:len(head)-1], `,"state":`...)
	pw := &payloadWriter{limit: c.MaxRead, crc: crc32.Update(0, castagnoli, head)}
	err = c.compressTo(w, -1, func(zw io.Writer) error {
		if _, err := zw.Write(head); err != nil {
			return err
		}
		pw.w = zw
		err := callWrite(write, pw)
		if perr := pw.close(); err == nil {
			err = perr
		}
		if err != nil {
			return err
		}
		var sum [4]byte
		binary.BigEndian.PutUint32(sum[:], pw.crc)
		var tb [maxTrailerLen]byte
		tail := append(tb[:0], TrailerV2.prefix...)
		tail = hex.AppendEncode(tail, sum[:])
		tail = append(tail, trailerSuffix...)
		_, err = zw.Write(tail)
		return err
	})
	pw.close()
	return pw.n, err
}

// callWrite calls write with w, turning a panic into an error.
func callWrite(write func(io.Writer) error, w io.Writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: write the payload: %w", ErrInvalid, Panicked(r))
		}
	}()
	return write(w)
}

// payloadWriter hashes, counts and passes on the bytes of a payload. A
// write after close, even from another goroutine, never reaches the file.
type payloadWriter struct {
	mu     sync.Mutex
	w      io.Writer
	limit  int64
	n      int64
	crc    uint32
	err    error // sticky
	closed bool
}

// close stops the writer and returns its sticky error.
func (p *payloadWriter) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return p.err
}

func (p *payloadWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return 0, fmt.Errorf("%w: write to a payload writer after its write function returned", ErrInvalid)
	case p.err != nil:
		return 0, p.err
	case int64(len(b)) > p.limit-p.n:
		p.err = fmt.Errorf("%w: a payload of more than %d bytes, the read limit: no load could read it back (see WithMaxReadSize)", ErrInvalid, p.limit)
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.crc = crc32.Update(p.crc, castagnoli, b[:n])
	p.n += int64(n)
	if err != nil {
		p.err = err
	}
	return n, err
}

// compressTo runs body with a writer to w that compresses as the codec
// says, closes the compressor and flushes. size is the number of bytes
// body writes, or -1 if unknown (a zstd frame records it when known).
func (c *Codec) compressTo(w io.Writer, size int64, body func(io.Writer) error) error {
	bw := c.getWriter(w)
	defer func() { bw.Reset(nil); c.writers.put(bw) }()
	var zw io.WriteCloser
	switch c.comp {
	case CompressNone:
		if err := body(bw); err != nil {
			return err
		}
		return bw.Flush()
	case CompressGzip:
		gw, ok := c.gzipW.get()
		if !ok {
			gw = newGzipWriter(bw)
		} else {
			gw.Reset(bw)
		}
		defer func() { gw.Reset(nil); c.gzipW.put(gw) }()
		zw = gw
	case CompressZstd:
		ze, err := c.zstdEncoder()
		if err != nil {
			return err
		}
		ze.ResetContentSize(bw, size)
		defer func() { ze.Reset(nil); c.zstdW.put(ze) }()
		zw = ze
	}
	if err := body(zw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// PayloadReader reads the payload of a byte payload checkpoint, as a
// stream, and verifies the checksum at its end: the Read that reaches the
// end returns io.EOF only if the trailer is there and its CRC-32C is that
// of every byte before it; otherwise it returns an ErrCorrupt error marked
// as damage (see IsDamage). Bytes read before are the file's, unverified:
// a reader must not act on them before the end. A payload of more bytes
// than the read limit fails with ErrCorrupt wrapping ErrTooLarge. The first
// error sticks. A PayloadReader is not safe for concurrent use.
type PayloadReader struct {
	src     io.Reader
	release func()
	buf     []byte // buf[lo:hi]: read, not yet given; the last TrailerLenV2 may be the trailer
	lo, hi  int
	crc     uint32
	colon   bool  // the colon after the "state" key has been read
	n       int64 // payload bytes given
	limit   int64
	srcEOF  bool
	err     error
	// Verified, if set, is called once when the checksum has verified.
	Verified func()
}

// payloadBufSize is the buffer a PayloadReader reads through.
const payloadBufSize = 32 << 10

// OpenPayload reads the header of the checkpoint r, whose size on disk is
// size (-1 if unknown), calls check with it, and returns the header and a
// reader of its payload, which the caller must Close, and the payload's
// size if a plain file tells it without reading (else -1). A checkpoint
// that is not a byte payload is read whole and verified (within the read
// limit): then the error wraps ErrPayloadMismatch if it verifies, and
// reports its damage if not. check's error is returned for a byte payload
// at once, unverified (it says the header disagrees with the name, which
// is damage of its own). Otherwise the errors are ReadHeader's.
func (c *Codec) OpenPayload(r io.Reader, size int64, check func(Header) error) (Header, *PayloadReader, int64, error) {
	st, err := c.openStream(r, size)
	if err != nil {
		return Header{}, nil, -1, err
	}
	hb := make([]byte, 0, payloadBufSize+TrailerLenV2)
	h, data, keyEnd, long, err := readHeader(st.r, hb)
	switch {
	case long:
		st.release()
		return h, nil, -1, corruptIO(fmt.Errorf("header longer than %d bytes: %w", MaxHeaderSize, io.ErrUnexpectedEOF))
	case err == nil && !IsPayload(h.Format):
		// A JSON state: the buffered read decides whether it is good.
		err = c.readOpened(io.MultiReader(bytes.NewReader(data), st.r), st, func(got Header, _ []byte) error {
			h = got
			if err := check(h); err != nil {
				return err
			}
			return fmt.Errorf("%w: a JSON state, not a byte payload", ErrPayloadMismatch)
		})
		st.release()
		return h, nil, -1, err
	case err == nil:
		err = check(h)
	}
	if err != nil {
		st.release()
		return h, nil, -1, err
	}
	p := newPayloadReader(st, data, keyEnd, c.MaxRead)
	payload := int64(-1)
	if st.comp == CompressNone && size >= 0 && p.colon {
		payload = max(size-int64(p.lo)-int64(TrailerLenV2), -1)
	}
	return h, p, payload, nil
}

// newPayloadReader returns the reader of the payload of the stream st, of
// which data holds the first bytes read, the header's up to keyEnd.
func newPayloadReader(st stream, data []byte, keyEnd int, limit int64) *PayloadReader {
	p := &PayloadReader{src: st.r, release: st.release, limit: limit, crc: crc32.Update(0, castagnoli, data[:keyEnd])}
	if cap(data) < payloadBufSize+TrailerLenV2 {
		data = append(make([]byte, 0, payloadBufSize+TrailerLenV2), data...)
	}
	p.buf, p.lo, p.hi = data[:cap(data)], keyEnd, len(data)
	p.findColon()
	return p
}

// findColon hashes the spaces and the colon after the "state" key that
// are in the buffer, and sets p.colon once the colon is past. Anything
// else before the colon is damage.
func (p *PayloadReader) findColon() {
	for !p.colon && p.lo < p.hi && p.err == nil {
		switch b := p.buf[p.lo]; b {
		case ' ', '\t', '\r', '\n':
		case ':':
			p.colon = true
		default:
			p.err = Damaged("no state")
		}
		p.crc = crc32.Update(p.crc, castagnoli, p.buf[p.lo:p.lo+1])
		p.lo++
	}
}

// fill reads more of the file into the buffer, moving what is not given
// yet to its start.
func (p *PayloadReader) fill() {
	if p.lo > 0 {
		p.hi = copy(p.buf, p.buf[p.lo:p.hi])
		p.lo = 0
	}
	n, err := p.src.Read(p.buf[p.hi:])
	p.hi += n
	switch {
	case err == io.EOF:
		p.srcEOF = true
	case err != nil:
		p.err = corruptIO(err)
	}
}

// Read reads the payload's next bytes into b (see PayloadReader).
func (p *PayloadReader) Read(b []byte) (int, error) {
	if p.src == nil && p.err == nil {
		p.err = errors.New("read of a closed payload reader")
	}
	if len(b) == 0 && p.err == nil {
		return 0, nil
	}
	for p.err == nil {
		if !p.colon {
			if p.lo == p.hi {
				if p.srcEOF {
					p.err = Damaged("no state")
					break
				}
				p.fill()
			}
			p.findColon()
			continue
		}
		if avail := p.hi - p.lo - TrailerLenV2; avail > 0 {
			n := copy(b, p.buf[p.lo:p.lo+min(avail, len(b))])
			if int64(n) > p.limit-p.n {
				p.err = fmt.Errorf("%w: %w: a payload of more than %d bytes (see WithMaxReadSize)", ErrCorrupt, ErrTooLarge, p.limit)
				break
			}
			p.crc = crc32.Update(p.crc, castagnoli, b[:n])
			p.lo += n
			p.n += int64(n)
			return n, nil
		}
		if p.srcEOF {
			p.err = p.verify()
			if p.err == io.EOF && p.Verified != nil {
				p.Verified()
				p.Verified = nil
			}
			break
		}
		p.fill()
	}
	return 0, p.err
}

// verify checks, at the end of the file, that what is left is format 2's
// trailer holding the CRC-32C of every byte before it, and returns io.EOF
// if so.
func (p *PayloadReader) verify() error {
	t := p.buf[p.lo:p.hi]
	if len(t) != TrailerLenV2 || string(t[:len(TrailerV2.prefix)]) != TrailerV2.prefix || string(t[len(t)-len(trailerSuffix):]) != trailerSuffix {
		return Damaged("no checksum trailer (truncated file?)")
	}
	want := t[len(TrailerV2.prefix) : len(t)-len(trailerSuffix)]
	var sum [4]byte
	var got [8]byte
	binary.BigEndian.PutUint32(sum[:], p.crc)
	hex.Encode(got[:], sum[:])
	if !bytes.Equal(got[:], want) {
		return Damaged("checksum mismatch: file says %s:%s, content is %s:%s", TrailerV2.name(), want, TrailerV2.name(), got[:])
	}
	return io.EOF
}

// Size returns the number of payload bytes read so far.
func (p *PayloadReader) Size() int64 { return p.n }

// Close releases the reader's resources. It does not close the file the
// reader reads. Reads after Close fail.
func (p *PayloadReader) Close() error {
	if p.release != nil {
		p.release()
		p.release = nil
	}
	p.src = nil
	return nil
}

// VerifyPayload reads a byte payload to its end, verifying it (see
// PayloadReader), and returns its size.
func (p *PayloadReader) VerifyPayload() (int64, error) {
	var buf [payloadBufSize]byte
	for {
		_, err := p.Read(buf[:])
		if err == io.EOF {
			return p.n, nil
		}
		if err != nil {
			return p.n, err
		}
	}
}
