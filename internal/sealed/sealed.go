// Package sealed encrypts and authenticates every object a store writes,
// with age (filippo.io/age): a Backend wrapper that seals what a write
// produces and opens only what authenticates.
//
// An object sealed here is a key line, then an age file encrypted to one
// X25519 recipient:
//
//	checkpoint-age-v1 <key ID: 16 hex digits>\n
//	age-encryption.org/v1 ... (header, nonce, 64 KiB chunks)
//
// The key line names the key the object is encrypted to, so that an object
// no identity opens is told apart from a damaged one and its error names
// the missing key; it is not authenticated, and is checked against the
// identity that opens the object. Everything else (the checkpoint's
// header, metadata, state, checksum) is inside the age payload.
//
// What reading an object concludes:
//   - it opens and every chunk authenticates: its bytes, as written;
//   - it is encrypted to a key no identity given opens: ErrNoKey, never
//     damage (it may be good: the key is elsewhere);
//   - it is not encrypted (a plaintext checkpoint): ErrPlaintext, never
//     damage, unless the Keys read plaintext (a migration);
//   - anything else (a failed authentication of the header or of a chunk, a
//     truncation, a key line that disagrees with the key that opens it, or
//     one that differs from the magic in a byte or two): a
//     damage error of package format, proof that the object is damaged.
//
// An I/O error of the wrapped backend is returned as it is: it proves
// nothing.
package sealed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint/internal/format"
)

// Sentinel errors, package format's (package checkpoint exports each under
// the same name).
var (
	ErrNoKey     = format.ErrNoKey
	ErrPlaintext = format.ErrPlaintext
)

// magic begins every sealed object; the key line is magic, the key ID and
// a newline.
const (
	magic      = format.SealedMagic
	keyIDLen   = format.SealedKeyIDLen // hex digits: the first 8 bytes of a SHA-256
	keyLineLen = len(magic) + keyIDLen + 1
	nonceLen   = 16 // age's payload nonce
	chunkSize  = 64 << 10
	tagSize    = 16 // ChaCha20-Poly1305's, per chunk
)

// KeyID returns the ID of the key of r: the first 8 bytes, in hex, of the
// SHA-256 of its age1... string. It names the key in an object's key line
// and in an ErrNoKey error; it tells nothing of the key itself.
func KeyID(r *age.X25519Recipient) string {
	sum := sha256.Sum256([]byte(r.String()))
	return hex.EncodeToString(sum[:keyIDLen/2])
}

// Keys are the keys of an encrypting store: it writes to the current one,
// and reads objects encrypted to it or to any older one.
type Keys struct {
	to        *age.X25519Recipient
	toID      string
	byID      map[string]*age.X25519Identity
	all       []age.Identity
	plaintext bool
	keyLine   []byte
	overhead  int64 // key line, age header and nonce: a sealed object's bytes beyond its payload's
	hdrLen    int64 // the age header and nonce, as Encrypt writes them
}

// NewKeys returns the Keys that write to current and read what current or
// any of older opens. With plaintext, an object that is not encrypted is
// read as it is (a migration: see package doc); it never makes a write
// plaintext.
func NewKeys(current *age.X25519Identity, older []*age.X25519Identity, plaintext bool) (*Keys, error) {
	if current == nil {
		return nil, errors.New("no current identity")
	}
	k := &Keys{
		to:        current.Recipient(),
		byID:      make(map[string]*age.X25519Identity, 1+len(older)),
		plaintext: plaintext,
	}
	k.toID = KeyID(k.to)
	for _, id := range append([]*age.X25519Identity{current}, older...) {
		if id == nil {
			return nil, errors.New("a nil identity")
		}
		kid := KeyID(id.Recipient())
		if _, dup := k.byID[kid]; dup {
			continue
		}
		k.byID[kid] = id
		k.all = append(k.all, id)
	}
	k.keyLine = []byte(magic + k.toID + "\n")
	// An X25519 header has one stanza of fixed length: measure it once,
	// so that an object's payload size follows from its size alone.
	var n countWriter
	if _, err := age.Encrypt(&n, k.to); err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	k.hdrLen = n.n
	k.overhead = int64(keyLineLen) + k.hdrLen
	return k, nil
}

// CurrentID returns the ID of the key the Keys write to.
func (k *Keys) CurrentID() string { return k.toID }

// ReadsPlaintext reports whether the Keys read objects that are not
// encrypted.
func (k *Keys) ReadsPlaintext() bool { return k.plaintext }

// Same reports whether k and o write to the same key and read the same.
func (k *Keys) Same(o *Keys) bool {
	if k == o {
		return true
	}
	if k == nil || o == nil || k.toID != o.toID || k.plaintext != o.plaintext || len(k.byID) != len(o.byID) {
		return false
	}
	for kid := range k.byID {
		if _, ok := o.byID[kid]; !ok {
			return false
		}
	}
	return true
}

// Seal returns the write that seals what write produces into its writer.
func (k *Keys) Seal(write func(io.Writer) error) func(io.Writer) error {
	return func(w io.Writer) error {
		if _, err := w.Write(k.keyLine); err != nil {
			return err
		}
		cw := &countWriter{w: w}
		aw, err := age.Encrypt(cw, k.to)
		if err != nil {
			return fmt.Errorf("encrypt: %w", err)
		}
		if cw.n != k.hdrLen {
			// Sizes follow from a fixed header: a header of another
			// length (another age) would make them wrong.
			return fmt.Errorf("encrypt: an age header of %d bytes, not %d", cw.n, k.hdrLen)
		}
		if err := write(aw); err != nil {
			return err
		}
		return aw.Close()
	}
}

// PayloadSize returns the size of the bytes sealed in an object of size
// bytes (-1 for -1): what a write produced. A size no sealed object has
// (a damaged or plaintext object) is returned as it is.
func (k *Keys) PayloadSize(size int64) int64 {
	x := size - k.overhead // the encrypted chunks
	if size < 0 || x < tagSize {
		return size
	}
	chunks := (x + chunkSize + tagSize - 1) / (chunkSize + tagSize)
	p := x - chunks*tagSize
	if p < 0 || chunks > 1 && p <= (chunks-1)*chunkSize {
		return size
	}
	return p
}

// Open opens r, the object at loc (for messages), read from its first
// byte: the stream of its sealed bytes, and whether r is plaintext read as
// it is (with Keys that read plaintext). Its errors are as the package doc
// says; the stream's read errors are too, and return each failing chunk's
// error before any of its bytes.
func (k *Keys) Open(r io.Reader, loc string) (_ io.Reader, plain bool, _ error) {
	var line [keyLineLen]byte
	n, err := io.ReadFull(r, line[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, false, err
	}
	got := line[:n]
	switch {
	case n >= len(magic) && bytes.HasPrefix(got, []byte(magic)):
	case n < len(magic) && bytes.HasPrefix([]byte(magic), got):
		return nil, false, damaged(loc, "it ends after %d bytes, within its key line", n)
	case nearMagic(got):
		return nil, false, damaged(loc, "its key line is malformed")
	case k.plaintext:
		return io.MultiReader(bytes.NewReader(bytes.Clone(got)), r), true, nil
	default:
		return nil, false, fmt.Errorf("%w: %s: an encrypting store reads only encrypted files (ReadPlaintext reads it, to re-encrypt a store)", ErrPlaintext, loc)
	}
	if n < keyLineLen {
		return nil, false, damaged(loc, "it ends after %d bytes, within its key line", n)
	}
	kid := string(got[len(magic) : len(magic)+keyIDLen])
	if got[keyLineLen-1] != '\n' || !isKeyID(kid) {
		return nil, false, damaged(loc, "its key line is malformed")
	}
	tr := &trackReader{r: r}
	ids := k.all
	id, known := k.byID[kid]
	if known {
		ids = []age.Identity{id}
	}
	ar, err := age.Decrypt(tr, ids...)
	if tr.err != nil {
		return nil, false, tr.err // an I/O error: nothing is proven
	}
	var none *age.NoIdentityMatchError
	switch {
	case err == nil && !known:
		return nil, false, damaged(loc, "its key line names key %s, but another key opens it", kid)
	case err == nil:
		return &openReader{r: ar, tr: tr, loc: loc}, false, nil
	case !known && errors.As(err, &none):
		return nil, false, fmt.Errorf("%w: %s is encrypted to key %s, which none of the %d identities given opens", ErrNoKey, loc, kid, len(k.all))
	}
	return nil, false, damaged(loc, "%v", err)
}

// nearMagic reports whether first, a file's first bytes, begin with the
// magic but for one or two bytes: a sealed file whose key line was
// damaged, not a plaintext one (which begins with '{', a compression's
// magic number or another JSON value, all far from the magic).
func nearMagic(first []byte) bool {
	if len(first) < len(magic) {
		return false
	}
	diff := 0
	for i := 0; i < len(magic); i++ {
		if first[i] != magic[i] {
			diff++
		}
	}
	return diff <= 2
}

func isKeyID(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return len(s) == keyIDLen
}

// openReader is a sealed object's stream: an error of its chunks is
// damage, one of the wrapped reader is returned as it is.
type openReader struct {
	r   io.Reader
	tr  *trackReader
	loc string
}

func (o *openReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err == nil || err == io.EOF {
		return n, err
	}
	if o.tr.err != nil {
		return n, o.tr.err
	}
	return n, damaged(o.loc, "%v", err)
}

// trackReader keeps the first error of its reader but io.EOF.
type trackReader struct {
	r   io.Reader
	err error
}

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.w == nil {
		c.n += int64(len(p))
		return len(p), nil
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// KeyLineLen is the length of an object's key line: the bytes that
// Current needs.
const KeyLineLen = keyLineLen

// Current reports whether an object whose first bytes are first is sealed
// to the key the Keys write to (it may still fail to open).
func (k *Keys) Current(first []byte) bool { return bytes.HasPrefix(first, k.keyLine) }
