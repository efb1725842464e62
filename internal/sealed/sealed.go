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
	"bufio"
	"bytes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"

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
	// ahead holds the encryptor of the next object, made by prepare on
	// another goroutine after a Seal (see Seal); refilling says that one
	// is being made.
	ahead     chan *encryptor
	refilling atomic.Bool
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
		ahead:     make(chan *encryptor, 1),
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
//
// What sealing costs beyond the encryption of the bytes is the key
// agreement of a new file key (two X25519 scalar multiplications): Seal
// takes an encryptor that was made ahead, after the Seal before, on
// another goroutine (while that Seal's write waited for the disk), and
// makes the next one so. Each encryptor, so each file key and nonce,
// seals one object only; the first Seal, or one that finds none ready,
// makes its own.
func (k *Keys) Seal(write func(io.Writer) error) func(io.Writer) error {
	return func(w io.Writer) error {
		var e *encryptor
		select {
		case e = <-k.ahead:
		default:
			var err error
			if e, err = k.prepare(); err != nil {
				return err
			}
		}
		k.refill()
		if _, err := w.Write(k.keyLine); err != nil {
			return err
		}
		if _, err := w.Write(e.head); err != nil {
			return err
		}
		sw := &sealWriter{aead: e.aead, dst: w, buf: chunkBuffers.Get().(*[]byte)}
		defer sw.release()
		if err := write(sw); err != nil {
			return err
		}
		return sw.Close()
	}
}

// encryptor is what one object is sealed with: its age header and nonce,
// made by age.Encrypt, and the AEAD of its payload, keyed from the file
// key age.Encrypt made (see keyCatcher) and that nonce.
type encryptor struct {
	head []byte
	aead cipher.AEAD
}

// keyCatcher is the recipient prepare gives age.Encrypt: it wraps the file
// key to the current key, as that key's recipient does, and keeps it, so
// that the payload is encrypted here (see sealWriter) rather than by age's
// writer, which copies every chunk into a buffer of its own.
type keyCatcher struct {
	to      *age.X25519Recipient
	fileKey []byte
}

func (c *keyCatcher) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	c.fileKey = bytes.Clone(fileKey)
	return c.to.Wrap(fileKey)
}

// prepare makes an encryptor: a new file key, wrapped to the current key,
// the header and nonce age.Encrypt writes, and the payload's AEAD.
func (k *Keys) prepare() (*encryptor, error) {
	c := &keyCatcher{to: k.to}
	var head bytes.Buffer
	if _, err := age.Encrypt(&head, c); err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	if n := int64(head.Len()); n != k.hdrLen || len(c.fileKey) == 0 {
		// Sizes follow from a fixed header: a header of another
		// length (another age) would make them wrong.
		return nil, fmt.Errorf("encrypt: an age header of %d bytes, not %d", n, k.hdrLen)
	}
	// The header ends with the payload's nonce (the age specification).
	nonce := head.Bytes()[head.Len()-nonceLen:]
	key, err := payloadKey(c.fileKey, nonce)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	return &encryptor{head: head.Bytes(), aead: aead}, nil
}

// refill makes the next encryptor on another goroutine, unless one is
// being made; it is dropped if one is ready meanwhile.
func (k *Keys) refill() {
	if !k.refilling.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer k.refilling.Store(false)
		e, err := k.prepare()
		if err != nil {
			return // the next Seal makes its own, and returns the error
		}
		select {
		case k.ahead <- e:
		default:
		}
	}()
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
	ids := k.all
	id, known := k.byID[kid]
	if known {
		ids = []age.Identity{id}
	}
	br := headerReaders.Get().(*bufio.Reader)
	br.Reset(r)
	pr, err := k.openPayload(br, loc, kid, known, ids)
	if err != nil {
		br.Reset(nil)
		headerReaders.Put(br)
		return nil, false, err
	}
	return pr, false, nil
}

// openPayload reads the age header and nonce of an object from br, after
// its key line naming key kid (known if the Keys have it; ids are the
// identities to try), unwraps its file key and returns the reader of its
// payload. Its errors are Open's.
func (k *Keys) openPayload(br *bufio.Reader, loc, kid string, known bool, ids []age.Identity) (*payloadReader, error) {
	hdr, err := readHeader(br)
	switch {
	case errors.Is(err, errTruncatedHeader) || errors.Is(err, errLongHeader):
		return nil, damaged(loc, "%v", err)
	case err != nil:
		return nil, err // an I/O error: nothing is proven
	}
	if want := k.hdrLen - nonceLen; int64(len(hdr)) != want {
		// Every header this package writes has one X25519 stanza, of a
		// fixed length: any other (many stanzas, each an unwrap to try)
		// is refused before a key is tried. To a key given it is damage;
		// to another key it may be a later release's (another kind of
		// key): that key is not given, and nothing is proven.
		if known {
			return nil, damaged(loc, "an age header of %d bytes, not the %d of the one stanza this package writes", len(hdr), want)
		}
		return nil, fmt.Errorf("%w: %s is encrypted to key %s, with a header this package does not write (%d bytes)", ErrNoKey, loc, kid, len(hdr))
	}
	fileKey, err := age.DecryptHeader(hdr, ids...)
	var none *age.NoIdentityMatchError
	switch {
	case err == nil && !known:
		return nil, damaged(loc, "its key line names key %s, but another key opens it", kid)
	case err == nil:
	case !known && errors.As(err, &none):
		return nil, fmt.Errorf("%w: %s is encrypted to key %s, which none of the %d identities given opens", ErrNoKey, loc, kid, len(k.all))
	default:
		return nil, damaged(loc, "%v", err)
	}
	var nonce [nonceLen]byte
	if _, err := io.ReadFull(br, nonce[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, damaged(loc, "%v", errTruncatedHeader)
		}
		return nil, err
	}
	key, err := payloadKey(fileKey, nonce[:])
	if err != nil {
		return nil, damaged(loc, "%v", err)
	}
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, damaged(loc, "%v", err)
	}
	return &payloadReader{c: chunks{aead: aead, src: br, loc: loc}, buf: chunkBuffers.Get().(*[]byte)}, nil
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

// countWriter counts the bytes written to it, and keeps none.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// KeyLineLen is the length of an object's key line: the bytes that
// Current needs.
const KeyLineLen = keyLineLen

// Current reports whether an object whose first bytes are first is sealed
// to the key the Keys write to (it may still fail to open).
func (k *Keys) Current(first []byte) bool { return bytes.HasPrefix(first, k.keyLine) }
