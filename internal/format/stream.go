package format

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"
	"strings"
	"unicode"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// A Load streams a checkpoint of format 2 whose state type is plain (see
// PlainType): the state is decoded from the file's bytes as they are read,
// and the CRC-32C is computed on the same bytes, so that no buffer holds
// the file beside the decoded state (a buffered load holds both:
// encoding/json decodes a value only from its whole bytes). The state is
// returned only once the trailer has verified every byte; a state decoded
// from a file whose checksum fails is dropped.
//
// The contract, in three parts:
//
//   - Host code never sees damaged bytes. A plain type is decoded by the
//     library alone (no UnmarshalJSON, UnmarshalText or other method of the
//     host's), so streaming it before the checksum runs no host code. Every
//     other type reads the whole file and verifies its checksum before any
//     of the host's code sees a byte; a migration gets the state's bytes
//     once the trailer has verified them.
//
//   - A streamed load means what encoding/json means. The decoder is
//     github.com/go-json-experiment/json, the upstream of Go's
//     encoding/json/v2, with the options that give encoding/json's meaning
//     (jsonv1.DefaultOptionsV1) less ReportErrorsWithLegacySemantics,
//     whose first effect is to check the whole value's syntax before
//     decoding it, which needs the whole value in memory. The two decoders
//     are proven to agree on plain types only: the fuzz target
//     FuzzStreamedLoadMeansWhatEncodingJSONMeans builds struct types from
//     the fuzzer's bytes, with the tag options the two read differently.
//     The gate (PlainType) refuses the rest: a ",string" option, an option
//     encoding/json ignores and v2 does not (",embed", "case:strict"), a
//     name v2 parses otherwise, []byte, json.Number, time.Time (v2 unquotes
//     it before parsing), a map of integer keys (v2 takes the key "null"
//     as 0, encoding/json refuses it) or of float keys. Where the stream
//     fails on a plain type (v2 refuses a declaration encoding/json
//     tolerates, such as two fields of one tag name, or an input, such as
//     a name that matches two fields in other cases), the file is read
//     again the buffered way (errStreamUnsure), and encoding/json gives the
//     answer and the error; if it decodes the state, the store reads the
//     buffered way from then on (Codec.noStream). So the stream is trusted
//     only when it succeeds, on a type where it agrees.
//
//   - A streamed read costs at most what a buffered read costs and a few
//     MiB. The decoder holds a whole JSON token (a string) in its buffer,
//     which doubles: the reader under it refuses to fill a buffer larger
//     than MaxStreamBuffer (errLargeValue), and the file is read the
//     buffered way, within the read limit (and, if that read decodes the
//     state, every later load of the store).
//
// Files of format 1 (a SHA-256 trailer) and files that do not begin as this
// package writes format 2 (StreamPrefix) read the whole file first.

// StreamPrefix is how every envelope of format 2 that this package writes
// begins: the header is marshalled from a struct whose first field is the
// format. A file that begins otherwise is read the buffered way.
const StreamPrefix = `{"format":2,`

// errStreamUnsure means that a streamed read could not conclude as a
// buffered read of the same bytes would: the caller reads the file again
// with Codec.Read, whose answer is the load's. It is returned only for a
// file whose bytes are not proven damaged and read within the limit.
var errStreamUnsure = errors.New("the streamed decode needs the buffered one")

// errLargeValue means that the streaming decoder asked for a buffer larger
// than MaxStreamBuffer: the file is read the buffered way instead.
var errLargeValue = errors.New("a JSON value too large to stream")

// MaxStreamBuffer bounds the buffer of the streaming decoder. It holds a
// whole token (a string, a number) and, for some types, a whole value, and
// doubles to fit one: a state of plain structs, numbers and short strings
// needs a few KiB, and a string of a few MiB would cost several times its
// size before its decoded copy (a bomb: five times the read limit). The
// reader refuses to fill a buffer whose free space alone is larger, which
// bounds the buffer to a little over twice this (see
// jsontext.Decoder's fetch) and all its growth to about four times.
const MaxStreamBuffer = 1 << 20

// TrailerLenV2 is the length of format 2's trailer.
var TrailerLenV2 = TrailerV2.size()

// decodeOptions are what the state is decoded with: encoding/json's
// meaning, streaming (see above).
var decodeOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))

// strictOptions add StrictDecoding's refusal of unknown fields.
var strictOptions = jsonv2.JoinOptions(decodeOptions, jsonv2.RejectUnknownMembers(true))

// checksumReader passes a decompressed checkpoint through and computes the
// CRC-32C of every byte but the last TrailerLenV2, which it holds back: at
// the end of the stream, they are the trailer, and the CRC covers exactly
// the bytes before it. It counts the bytes and fails once there are more
// than limit, and with errLargeValue when asked to fill more than
// MaxStreamBuffer bytes at once: its reader is a streaming decoder's, which
// asks to fill the free part of its buffer. Its first error other than
// io.EOF sticks.
type checksumReader struct {
	r     io.Reader
	limit int64
	n     int64 // bytes read
	crc   uint32
	tail  []byte // the last bytes read, not yet hashed: at most TrailerLenV2
	err   error
	eof   bool
}

func newChecksumReader(r io.Reader, limit int64) *checksumReader {
	return &checksumReader{r: r, limit: limit, tail: make([]byte, 0, 2*TrailerLenV2)}
}

func (c *checksumReader) Read(p []byte) (int, error) {
	switch {
	case c.err != nil:
		return 0, c.err
	case c.eof:
		return 0, io.EOF
	case len(p) > MaxStreamBuffer:
		c.err = errLargeValue
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		c.err = ErrTooLarge
		return 0, c.err
	}
	c.hold(p[:n])
	switch {
	case err == io.EOF:
		c.eof = true
	case err != nil:
		c.err = err
	}
	return n, err
}

// hold appends b to the bytes held back and hashes what no longer needs to
// be: all but the last TrailerLenV2 bytes read.
func (c *checksumReader) hold(b []byte) {
	if excess := len(c.tail) + len(b) - TrailerLenV2; excess > 0 {
		if excess <= len(c.tail) {
			c.crc = crc32.Update(c.crc, castagnoli, c.tail[:excess])
			c.tail = append(c.tail[:0], c.tail[excess:]...)
		} else {
			c.crc = crc32.Update(c.crc, castagnoli, c.tail)
			c.crc = crc32.Update(c.crc, castagnoli, b[:excess-len(c.tail)])
			b = b[excess-len(c.tail):]
			c.tail = c.tail[:0]
		}
	}
	c.tail = append(c.tail, b...)
}

// drain reads what is left of the stream, so that the trailer is known,
// and returns the first error other than io.EOF.
func (c *checksumReader) drain() error {
	if c.err == nil && !c.eof {
		_, _ = io.Copy(io.Discard, c)
	}
	return c.err
}

// verify checks, once the stream is drained, that it ended with format
// 2's trailer and that the trailer's CRC-32C is that of the bytes before
// it. ok is false if the trailer is not of format 2's form (the buffered
// read decides what that means); err is the checksum's mismatch.
func (c *checksumReader) verify() (ok bool, err error) {
	t := c.tail
	if len(t) != TrailerLenV2 || string(t[:len(TrailerV2.prefix)]) != TrailerV2.prefix || string(t[len(t)-len(trailerSuffix):]) != trailerSuffix {
		return false, nil
	}
	want := t[len(TrailerV2.prefix) : len(t)-len(trailerSuffix)]
	var sum [4]byte
	var got [8]byte
	binary.BigEndian.PutUint32(sum[:], c.crc)
	hex.Encode(got[:], sum[:])
	if !bytes.Equal(got[:], want) {
		return true, Damaged("checksum mismatch: file says %s:%s, content is %s:%s", TrailerV2.name(), want, TrailerV2.name(), got[:])
	}
	return true, nil
}

// LoadState reads the checkpoint r, whose size on disk is size (-1 if
// unknown), and decodes its state into v, a pointer to the store's type,
// at the store's schema sc (migrating it if need be). check is called
// with the header before the state is decoded; its error fails the read
// (after the checksum, as with read). It returns the header, and the
// errors read returns: ErrCorrupt for anything wrong with the bytes
// (marked as damage when it proves them damaged), an operating system's
// error as it is, check's and sc.Decode's errors.
//
// A file of format 2 of a plain state type is streamed (see StreamPrefix
// and streams); where the stream cannot conclude, the file is read again
// from reopen, the buffered way, and that read's answer is returned.
// reopen's reader is closed before LoadState returns. v holds the state
// only if the error is nil: it is zeroed otherwise. A byte payload holds no
// state: once it verifies (streamed, whatever its size) and check accepts
// its header, the error wraps ErrPayloadMismatch.
func (c *Codec) LoadState(r io.Reader, size int64, sc *Schema, check func(Header) error, v any, reopen func() (io.ReadCloser, int64, error)) (_ Header, err error) {
	defer func() {
		if err != nil {
			// Whatever a failed decode left there is no state.
			reflect.ValueOf(v).Elem().SetZero()
		}
	}()
	var h Header
	buffered := func(r io.Reader, st stream) error {
		return c.readOpened(r, st, func(got Header, state []byte) error {
			h = got
			if err := check(h); err != nil {
				return err
			}
			if IsPayload(h.Format) {
				return errNotState
			}
			return sc.Decode(h.Schema, state, v)
		})
	}
	st, err := c.openStream(r, size)
	if err != nil {
		return h, err
	}
	var pre [len(StreamPrefix)]byte
	n, err := io.ReadFull(st.r, pre[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		st.release()
		return h, corruptIO(err)
	}
	rest := io.MultiReader(bytes.NewReader(pre[:n]), st.r)
	if string(pre[:n]) == PayloadPrefix {
		// A byte payload, verified as it streams whatever its size: no
		// state to decode, but a good file is no damage either.
		got, data, keyEnd, long, err := readHeader(rest, make([]byte, 0, headerBufSize))
		if err != nil || long || !IsPayload(got.Format) {
			// The buffered read decides what that means.
			err := buffered(io.MultiReader(bytes.NewReader(data), rest), st)
			st.release()
			return h, err
		}
		p := newPayloadReader(stream{r: rest, release: st.release}, data, keyEnd, c.MaxRead)
		defer p.Close()
		if _, err := p.VerifyPayload(); err != nil {
			return got, err
		}
		if err := check(got); err != nil {
			return got, err
		}
		return got, errNotState
	}
	if c.noStream.Load() || !c.Streams(reflect.TypeOf(v).Elem()) || string(pre[:n]) != StreamPrefix || st.comp == CompressNone && st.hint > c.MaxRead {
		err := buffered(rest, st)
		st.release()
		return h, err
	}
	h, decodeFailed, err := c.stream(rest, sc, check, v)
	st.release()
	if !errors.Is(err, errStreamUnsure) {
		return h, err
	}
	reflect.ValueOf(v).Elem().SetZero() // what the stream decoded is dropped
	f, size, err := reopen()
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	if st, err = c.openStream(f, size); err != nil {
		return Header{}, err
	}
	defer st.release()
	h = Header{}
	err = buffered(st.r, st)
	if err == nil && decodeFailed {
		// encoding/json decoded what the stream refused, or what the
		// stream would have needed too large a buffer for: this state
		// type needs the buffered read (see the comment at the top).
		c.noStream.Store(true)
	}
	return h, err
}

// stream reads a checkpoint that begins with StreamPrefix from r, a
// decompressed stream, as LoadState describes. decodeFailed reports that
// the state's decoder failed on a file that verified (errStreamUnsure).
func (c *Codec) stream(r io.Reader, sc *Schema, check func(Header) error, v any) (h Header, decodeFailed bool, err error) {
	cr := newChecksumReader(r, c.MaxRead)
	opts := decodeOptions
	if sc.Strict {
		opts = strictOptions
	}
	// The header is decoded as every read decodes one (readHeader,
	// ParseHeader); the state is decoded from what follows the "state"
	// key, by a decoder that starts there as at the start of an object.
	hb := c.getBuffer()
	defer c.PutBuffer(hb)
	hb.Grow(headerBufSize)
	h, head, keyEnd, long, herr := readHeader(cr, hb.AvailableBuffer())
	if cr.err != nil {
		herr = cr.err // drain reports it
	}
	if herr == nil && !long && IsPayload(h.Format) {
		// A byte payload that begins as a state does (a format key
		// given twice): the buffered read decides what it is.
		return h, false, errStreamUnsure
	}
	if herr == nil && !long && h.Format != TrailerV2.format {
		herr = Damaged("format %d with the checksum of format %d (%s)", h.Format, TrailerV2.format, TrailerV2.name())
	}
	var checkErr error
	var raw []byte
	unsure := false
	if herr == nil && !long {
		dec := jsontext.NewDecoder(io.MultiReader(strings.NewReader(`{"state"`), bytes.NewReader(head[keyEnd:]), cr), opts)
		_, _ = dec.ReadToken() // the '{' and the key just given
		_, _ = dec.ReadToken()
		checkErr = check(h)
		switch kind := dec.PeekKind(); {
		case kind == 'n' || kind == jsontext.Kind(0):
			unsure = true // null or nothing: the buffered read says which error
		case checkErr != nil:
			unsure = dec.SkipValue() != nil
		case h.Schema == sc.Version:
			decodeFailed = jsonv2.UnmarshalDecode(dec, v) != nil
			unsure = decodeFailed
		default:
			// A migration (or a newer schema's refusal) gets the
			// state's bytes, after the checksum.
			val, err := dec.ReadValue()
			unsure = err != nil
			raw = bytes.Clone(val)
		}
		unsure = unsure || !trailerFollows(dec)
	}
	if err := cr.drain(); err != nil {
		if errors.Is(err, errLargeValue) {
			// Not the file's fault: the buffered read decides. A state
			// that needed so large a buffer will again.
			return h, decodeFailed, errStreamUnsure
		}
		if errors.Is(err, ErrTooLarge) {
			return h, false, fmt.Errorf("%w: %w of %d bytes (see WithMaxReadSize)", ErrCorrupt, ErrTooLarge, c.MaxRead)
		}
		return h, false, corruptIO(err)
	}
	if long {
		// A header this long is read the buffered way, within the
		// read limit, which decides what it means.
		return h, false, errStreamUnsure
	}
	switch ok, sumErr := cr.verify(); {
	case !ok:
		return h, false, errStreamUnsure
	case sumErr != nil:
		// A trailer this package does not know may be a newer format's:
		// then the header says so, and the file is no proof of damage.
		if errors.Is(herr, ErrFormat) {
			return h, false, herr
		}
		return h, false, sumErr
	case herr != nil:
		return h, false, herr
	case unsure:
		return h, decodeFailed, errStreamUnsure
	case checkErr != nil:
		return h, false, checkErr
	case raw != nil:
		return h, false, sc.Decode(h.Schema, raw, v)
	}
	return h, false, nil
}

// errNotState is the error of a load of a state from a byte payload that
// verified.
var errNotState = fmt.Errorf("%w: a byte payload, not a JSON state", ErrPayloadMismatch)

// trailerFollows reads the rest of the envelope after the state, and
// reports whether it is the checksum member and the object's end, then
// nothing. With the trailer's bytes checked, it proves the state the only
// value between the "state" key and the trailer.
func trailerFollows(dec *jsontext.Decoder) bool {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '"' || tok.String() != "checksum" {
		return false
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '"' {
		return false
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return false
	}
	_, err := dec.ReadToken()
	return err == io.EOF
}

// plainVerdict is PlainType's answer for one type.
type plainVerdict struct {
	t     reflect.Type
	plain bool
}

// Streams reports whether a state of type t may be streamed: whether it is
// plain (see PlainType). The answer is kept for the last type asked about:
// a store asks about its own type only.
func (c *Codec) Streams(t reflect.Type) bool {
	if p := c.plain.Load(); p != nil && p.t == t {
		return p.plain
	}
	p := &plainVerdict{t: t, plain: PlainType(t, make(map[reflect.Type]bool))}
	c.plain.Store(p)
	return p.plain
}

var (
	jsonUnmarshaler   = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler   = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonv2Unmarshaler = reflect.TypeFor[jsonv2.Unmarshaler]()
	jsonv2From        = reflect.TypeFor[jsonv2.UnmarshalerFrom]()
	jsonNumber        = reflect.TypeFor[json.Number]()
	jsonRawMessage    = reflect.TypeFor[json.RawMessage]()
)

// PlainType reports whether values of t are decoded by the streaming decoder
// with encoding/json's meaning on every input where it succeeds, and run none
// of the host's code: what FuzzStreamedLoadMeansWhatEncodingJSONMeans proves. Plain are booleans, integers (not uintptr), floats, strings, the
// empty interface, and pointers, slices, arrays, maps with string keys, and
// structs of plain types, where no type (nor a pointer to it) has an
// UnmarshalJSON, UnmarshalText or UnmarshalJSONFrom method. A struct field's
// tag may give a name of the characters encoding/json accepts (one starting
// with a quote v2 reads otherwise) and the options omitempty and omitzero
// only; an embedded field must be a struct, without a tag. Not plain, and
// read the buffered way: []byte and byte arrays (base64 and its tolerances),
// json.Number, json.RawMessage, maps of other keys (integers: v2 decodes the
// key "null" as 0, which encoding/json refuses; floats; booleans), a
// ",string" option or any option encoding/json ignores and v2 does not
// (",embed", "case:strict", "format:..."), an unexported field with a tag, an
// embedded pointer. seen holds the types being judged: a type that refers to
// itself is judged by its other parts.
func PlainType(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	if t == jsonNumber || t == jsonRawMessage {
		return false
	}
	for _, m := range [...]reflect.Type{jsonUnmarshaler, textUnmarshaler, jsonv2Unmarshaler, jsonv2From} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	case reflect.Interface:
		return t.NumMethod() == 0
	case reflect.Pointer:
		return PlainType(t.Elem(), seen)
	case reflect.Slice, reflect.Array:
		return t.Elem().Kind() != reflect.Uint8 && PlainType(t.Elem(), seen)
	case reflect.Map:
		// Only string keys: v2 with v1's options takes the quoted key
		// "null" of an integer-keyed map as 0, where encoding/json
		// refuses the file.
		return t.Key().Kind() == reflect.String && PlainType(t.Key(), seen) && PlainType(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if !plainField(t.Field(i), seen) {
				return false
			}
		}
		return true
	}
	return false
}

// plainField reports whether the struct field f is plain (see PlainType).
func plainField(f reflect.StructField, seen map[reflect.Type]bool) bool {
	tag, tagged := f.Tag.Lookup("json")
	switch {
	case tag == "-":
		return true // ignored by both
	case f.Anonymous:
		return !tagged && f.Type.Kind() == reflect.Struct && PlainType(f.Type, seen)
	case !f.IsExported():
		return !tagged // ignored by both; v2 refuses a tag there
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name != "" && !validTagName(name) {
		return false
	}
	if opts != "" {
		for o := range strings.SplitSeq(opts, ",") {
			if o != "omitempty" && o != "omitzero" {
				return false
			}
		}
	}
	return PlainType(f.Type, seen)
}

// validTagName reports whether encoding/json takes name from a tag as the
// field's name (else it uses the field's Go name): letters, digits and
// the punctuation it allows, with neither a quote nor a backslash. v2
// reads a name starting with a single quote as a quoted string.
func validTagName(name string) bool {
	for _, c := range name {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// Streaming reports whether the codec's loads may stream: false once a
// state type's decode needed the buffered read (see LoadState).
func (c *Codec) Streaming() bool { return !c.noStream.Load() }
