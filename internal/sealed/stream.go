package sealed

import (
	"bufio"
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"
)

// Reading and writing a sealed object's payload. age.Decrypt would read
// it, but it allocates a new 64 KiB buffer for every chunk it decrypts,
// and copies each chunk twice: a Load of a megabyte paid for sixteen such
// buffers, and a List that reads the headers of 10,000 files for as many;
// age's writer copies every chunk into a buffer of its own too. The age
// header is still made by age (age.Encrypt) and parsed, authenticated and
// unwrapped by age (age.DecryptHeader); only the payload, a STREAM of
// ChaCha20-Poly1305 chunks as the age specification (age-encryption.org/v1,
// "Payload") defines it, is encrypted and decrypted here, each chunk in
// place in one buffer that a pool lends for the life of the reader or
// writer. age.Decrypt reads what this writes (see the tests).

const (
	encChunkSize = chunkSize + tagSize
	// maxHeader bounds the age header an object may have: the one this
	// package writes (one X25519 stanza) is about 200 bytes. A longer one
	// is damage (this package never wrote it), not a reason to read on.
	maxHeader = 16 << 10
	footer    = "--- "
)

// chunkBuffers lends payloadReaders their chunk buffer.
var chunkBuffers = sync.Pool{New: func() any { b := make([]byte, encChunkSize); return &b }}

// headerReaders lend Open the buffered reader an object is read through.
var headerReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// readHeader reads an age header from br, up to and with its footer line
// (the MAC): the bytes age.DecryptHeader parses. An error of br (not
// io.EOF) is returned as it is; a header that ends early is
// errTruncatedHeader, one longer than maxHeader errLongHeader.
func readHeader(br *bufio.Reader) ([]byte, error) {
	var hdr []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			if err == io.EOF {
				return nil, errTruncatedHeader
			}
			return nil, err
		}
		if len(hdr)+len(line) > maxHeader {
			return nil, errLongHeader
		}
		hdr = append(hdr, line...)
		if err == nil && bytes.HasPrefix(line, []byte(footer)) {
			return hdr, nil
		}
	}
}

var (
	errTruncatedHeader = errors.New("it ends within its age header")
	errLongHeader      = errors.New("its age header is longer than any this package writes")
)

// payloadKey is the payload's key: HKDF-SHA256 of the file key, salted
// with the payload's nonce, for "payload" (the age specification).
func payloadKey(fileKey, nonce []byte) ([]byte, error) {
	return hkdf.Key(sha256.New, fileKey, nonce, "payload", chacha20poly1305.KeySize)
}

// chunks is the source of an age payload's chunks: each one read from
// src, checked and opened in place.
type chunks struct {
	aead    cipher.AEAD
	src     *bufio.Reader
	loc     string
	counter uint64 // the next chunk's number
}

// open reads the next chunk into buf (of encChunkSize bytes) and opens it
// there: its plaintext, a slice of buf, and whether it was the last. Its
// errors: src's (not io.EOF) as they are, and damage.
func (c *chunks) open(buf []byte) (out []byte, last bool, err error) {
	in := buf[:encChunkSize]
	n, err := io.ReadFull(c.src, in)
	switch {
	case err == io.EOF:
		// The chunk before was full and not marked last.
		return nil, false, damaged(c.loc, "it is truncated after chunk %d", c.counter)
	case err == io.ErrUnexpectedEOF:
		last, in = true, in[:n]
	case err != nil:
		return nil, false, err
	default:
		// A full chunk is the last one if nothing follows it: decided
		// by the bytes, before opening, since opening in place spoils
		// the chunk if it fails.
		if _, err := c.src.Peek(1); err == io.EOF {
			last = true
		} else if err != nil {
			return nil, false, err
		}
	}
	if len(in) < tagSize || last && c.counter > 0 && len(in) == tagSize {
		// Only the first and only chunk may be empty.
		return nil, false, damaged(c.loc, "it is truncated within chunk %d", c.counter)
	}
	var nonce [chacha20poly1305.NonceSize]byte
	binary.BigEndian.PutUint64(nonce[3:11], c.counter)
	if last {
		nonce[11] = 1
	}
	out, err = c.aead.Open(in[:0], nonce[:], in, nil)
	if err != nil {
		return nil, false, damaged(c.loc, "chunk %d fails to authenticate (damaged, truncated, or followed by data)", c.counter)
	}
	c.counter++
	return out, last, nil
}

// payloadReader decrypts an age payload, chunk by chunk, each one in
// place: what Read returns has authenticated. Its errors: those of the
// object's reader (not io.EOF) as they are, and a damage error of the
// object for a chunk that fails to open, a truncation (at a chunk's
// boundary too: the last chunk is marked as the last) and data after the
// last chunk. It reads and opens a chunk only when asked for its bytes: a
// read of a checkpoint's header opens the first chunk only.
type payloadReader struct {
	c      chunks
	buf    *[]byte // the chunk buffer, from chunkBuffers; nil once released
	unread []byte  // decrypted, not yet read: a slice of *buf
	err    error   // sticky: io.EOF after the last chunk
}

func (r *payloadReader) Read(p []byte) (int, error) {
	if len(r.unread) > 0 {
		n := copy(p, r.unread)
		r.unread = r.unread[n:]
		return n, nil
	}
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.buf == nil {
		r.err = errClosed
		return 0, r.err
	}
	out, last, err := r.c.open(*r.buf)
	if err != nil {
		r.err = err
		return 0, err
	}
	r.unread = out
	if last {
		r.err = io.EOF
	}
	n := copy(p, r.unread)
	r.unread = r.unread[n:]
	return n, nil
}

var errClosed = errors.New("read of a closed sealed object")

// release returns the reader's buffers to their pools; it reads nothing
// after.
func (r *payloadReader) release() {
	if r.buf != nil {
		chunkBuffers.Put(r.buf)
		r.buf, r.unread = nil, nil
	}
	if r.c.src != nil {
		r.c.src.Reset(nil)
		headerReaders.Put(r.c.src)
		r.c.src = nil
	}
	if r.err == nil || r.err == io.EOF {
		r.err = errClosed
	}
}

// sealWriter encrypts an age payload into dst, chunk by chunk, each one in
// place in its buffer: the writer's side of chunks. A chunk is written
// once full and followed by more bytes, so that the last chunk, which
// Close writes, may be full but is empty only if the payload is.
type sealWriter struct {
	aead    cipher.AEAD
	dst     io.Writer
	buf     *[]byte // from chunkBuffers; nil once released
	n       int     // bytes of the chunk being filled
	counter uint64
	err     error // sticky
}

func (w *sealWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	total := len(p)
	for len(p) > 0 {
		if w.n == chunkSize {
			if err := w.flush(false); err != nil {
				w.err = err
				return 0, err
			}
		}
		c := copy((*w.buf)[w.n:chunkSize], p)
		w.n += c
		p = p[c:]
	}
	return total, nil
}

// Close writes the last chunk; it does not close dst.
func (w *sealWriter) Close() error {
	if w.err != nil {
		return w.err
	}
	err := w.flush(true)
	w.err = errors.New("write to a closed sealed object")
	if err != nil {
		w.err = err
	}
	return err
}

// flush encrypts the chunk being filled, in place, and writes it.
func (w *sealWriter) flush(last bool) error {
	var nonce [chacha20poly1305.NonceSize]byte
	binary.BigEndian.PutUint64(nonce[3:11], w.counter)
	if last {
		nonce[11] = 1
	}
	b := *w.buf
	out := w.aead.Seal(b[:0], nonce[:], b[:w.n], nil)
	w.counter++
	w.n = 0
	_, err := w.dst.Write(out)
	return err
}

// release gives the buffer back; the writer writes nothing after.
func (w *sealWriter) release() {
	if w.buf != nil {
		chunkBuffers.Put(w.buf)
		w.buf = nil
	}
	if w.err == nil {
		w.err = errors.New("write to a released sealed object")
	}
}
