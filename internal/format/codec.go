package format

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// MaxReadCeiling is the largest read limit a store applies: WithMaxReadSize
// clamps larger values to it, so that "no limit" (math.MaxInt64) is a limit
// whose arithmetic cannot overflow and whose bytes fit in a slice. Nothing
// can hold more in memory anyway: 1 TiB, or on 32-bit platforms the
// largest slice less 1 MiB.
const MaxReadCeiling = min(1<<40, math.MaxInt-1<<20)

// Version is the envelope format this package writes. Loads accept
// exactly the versions listed in SupportedFormat.
const Version = 2

// SupportedFormat reports whether this package reads envelopes of format v.
// Format 1 (a SHA-256 trailer) loads forever; format 2 differs from it only
// in its checksum (CRC-32C); format 3 is format 2 holding a byte payload
// (see PayloadVersion).
func SupportedFormat(v int) bool { return v == 1 || v == 2 || v == PayloadVersion }

// MaxHeaderSize bounds how many decompressed bytes List reads to find a
// file's header.
const MaxHeaderSize = 1 << 20

// The checksum trailer closes every envelope. Format 2 writes
//
//	,"checksum":"crc32c:<8 lower-case hex digits>"}\n
//
// the CRC-32C (Castagnoli) of every byte of the (decompressed) file before
// the trailer, the header and the state's exact bytes, big-endian. Format 1
// wrote the SHA-256 instead:
//
//	,"checksum":"sha256:<64 lower-case hex digits>"}\n
//
// The checksum detects damage (a torn write, a flipped bit, a truncated
// file), not tampering: anyone who can write the file can write a matching
// checksum of either kind. CRC-32C detects every burst of up to 32 bits and
// all but one in 2^32 of other random damage, and the CPU computes it (SSE
// 4.2, ARMv8 CRC32) many times faster than SHA-256 (see BENCHMARKS.md, "The
// checksum").
const (
	trailerSuffix = "\"}\n"
	maxTrailerLen = len(`,"checksum":"sha256:`) + sha256.Size*2 + len(trailerSuffix)
)

// Trailer is one format's checksum trailer.
type Trailer struct {
	format int
	prefix string // up to the digits
	digits int    // hex digits of the checksum
	Sum    func() hash.Hash
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The trailers of the two formats: TrailerV2 (CRC-32C) is the one written;
// TrailerV1 (SHA-256) is read in files of format 1.
var (
	TrailerV2 = Trailer{format: 2, prefix: `,"checksum":"crc32c:`, digits: crc32.Size * 2, Sum: func() hash.Hash { return crc32.New(castagnoli) }}
	TrailerV1 = Trailer{format: 1, prefix: `,"checksum":"sha256:`, digits: sha256.Size * 2, Sum: sha256.New}
)

// TrailerOf returns the trailer of format (format 2's for any but 1).
func TrailerOf(format int) Trailer {
	if format == 1 {
		return TrailerV1
	}
	return TrailerV2
}

// size is the length of the trailer in bytes.
func (t Trailer) size() int { return len(t.prefix) + t.digits + len(trailerSuffix) }

// name is the checksum's name as the trailer spells it.
func (t Trailer) name() string { return t.prefix[len(`,"checksum":"`) : len(t.prefix)-1] }

// Header is the part of the envelope that precedes the state. The field order
// here is the order on disk.
type Header struct {
	Format int               `json:"format"`
	Schema int               `json:"schema,omitempty"` // WithSchema's version; absent is 0
	Step   int64             `json:"step"`
	Kind   Kind              `json:"kind"`
	Time   time.Time         `json:"time"`
	Meta   map[string]string `json:"meta,omitempty"`
	// Metrics are the values given with the store's WithMetric: always
	// finite (JSON has no NaN or infinity), written as encoding/json writes
	// a float64. Releases before it ignore the field, as every unknown one.
	Metrics Metrics      `json:"metrics,omitempty"`
	Error   *ErrorRecord `json:"error,omitempty"`
}

// longestSaveTime is a save time of the longest text a header holds: a
// store stamps saves in UTC (a "Z"), and JSON writes up to nine digits of
// a fraction and no year past 9999.
var longestSaveTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)

// CheckFits returns an ErrInvalid error if the checkpoint of h, whose save
// time is not known yet, and of a state of n bytes would hold more bytes
// than a load of this codec reads (maxRead, which counts decompressed
// bytes: the compression of the file does not matter). It takes the
// longest save time, so it may refuse a checkpoint within ten bytes of the
// limit that would have fit.
func (c *Codec) CheckFits(h Header, n int) error {
	size := int64(n) + int64(TrailerOf(h.Format).size())
	if size+MaxHeaderSize <= c.MaxRead {
		return nil // every header the library writes is smaller
	}
	h.Time = longestSaveTime
	head, err := json.Marshal(h)
	if err != nil {
		return nil // the write reports it
	}
	size += int64(len(head) - 1 + len(`,"state":`))
	if size > c.MaxRead {
		return fmt.Errorf("%w: the checkpoint would hold up to %d bytes before compression (a state of %d), more than the read limit of %d bytes: no load could read it back (see WithMaxReadSize)", ErrInvalid, size, n, c.MaxRead)
	}
	return nil
}

// ErrFormat marks a file of a format version this package cannot read: it
// may be perfectly good for a newer version, so it is never quarantined.
var ErrFormat = errors.New("unsupported format version")

// ErrTooLarge marks a file larger than the read limit: it may be good.
var ErrTooLarge = errors.New("larger than the read limit")

// ErrUnsupported marks a file this package will not decode (a zstd window
// larger than it gives memory to, a zstd dictionary): it may be good.
var ErrUnsupported = errors.New("unsupported compression parameters")

// damageError marks an error that proves a file's bytes damaged: its checksum
// does not match, or its envelope or compressed stream is malformed, as found
// by reading it whole within the read limit (or its header disagrees with its
// name). Only such a file is moved aside (see the store's
// quarantineIfDamaged): "could not check it here" (too large, unsupported, a
// newer format, permission, an I/O error, not a regular file) is never proof.
// The mark does not change the message.
type damageError struct{ err error }

func (d *damageError) Error() string { return d.err.Error() }
func (d *damageError) Unwrap() error { return d.err }

// Damaged returns an ErrCorrupt error marked as proof of damage: format
// and args describe the damage, after the sentinel.
func Damaged(format string, args ...any) error {
	return &damageError{fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)}
}

// IsDamage reports whether err proves a file damaged.
func IsDamage(err error) bool {
	var d *damageError
	return errors.As(err, &d)
}

// AppendTrailer appends t's trailer for the bytes sum has hashed.
func AppendTrailer(b []byte, t Trailer, sum hash.Hash) []byte {
	b = append(b, t.prefix...)
	var d [sha256.Size]byte
	b = hex.AppendEncode(b, sum.Sum(d[:0]))
	return append(b, trailerSuffix...)
}

// ParseEnvelope verifies data, a whole decompressed checkpoint, and splits
// it into its header and the state's exact bytes (a part of data, not a
// copy). The header is checked; the state is only known to be there: a
// load decodes it.
func ParseEnvelope(data []byte) (Header, []byte, error) {
	t, err := Verify(data)
	if err != nil {
		// A trailer this package does not know may be a newer format's:
		// then the header says so, and the file is no proof of damage.
		if h, _, herr := ParseHeader(data); errors.Is(herr, ErrFormat) {
			return h, nil, herr
		}
		return Header{}, nil, err
	}
	body := data[:len(data)-t.size()]
	h, keyEnd, err := ParseHeader(body)
	if errors.Is(err, ErrShortHeader) {
		return h, nil, Damaged("no state")
	}
	if err != nil {
		return h, nil, err
	}
	if want := TrailerOf(h.Format); t.format != want.format {
		return h, nil, Damaged("format %d with the checksum of format %d (%s)", h.Format, t.format, t.name())
	}
	// The header stopped after the "state" key: the value follows its
	// colon and runs to the trailer, as the writer put it.
	rest := bytes.TrimLeft(body[keyEnd:], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return h, nil, Damaged("no state")
	}
	if IsPayload(h.Format) {
		return h, rest[1:], nil // every byte up to the trailer, none may be
	}
	// A null state is a nil one, saved as such: the checksum vouches for
	// it, and Schema.Decode loads it only into a type that can be nil.
	state := bytes.TrimSpace(rest[1:])
	if len(state) == 0 {
		return h, nil, Damaged("no state")
	}
	return h, state, nil
}

// Verify checks the checksum trailer of a decompressed checkpoint, of
// either format, and returns which trailer it has.
func Verify(data []byte) (Trailer, error) {
	if len(data) == 0 {
		return Trailer{}, Damaged("empty file")
	}
	for _, t := range [...]Trailer{TrailerV2, TrailerV1} {
		n := len(data) - t.size()
		if n < 0 || string(data[n:n+len(t.prefix)]) != t.prefix || string(data[len(data)-len(trailerSuffix):]) != trailerSuffix {
			continue
		}
		want := data[n+len(t.prefix) : len(data)-len(trailerSuffix)]
		sum := t.Sum()
		sum.Write(data[:n])
		var d [sha256.Size]byte
		var got [sha256.Size * 2]byte
		hex.Encode(got[:], sum.Sum(d[:0]))
		if !bytes.Equal(got[:t.digits], want) {
			return t, Damaged("checksum mismatch: file says %s:%s, content is %s:%s", t.name(), want, t.name(), got[:t.digits])
		}
		return t, nil
	}
	return Trailer{}, Damaged("no checksum trailer (truncated file?)")
}

// decodeHeader decodes the header fields of an envelope from dec and stops
// after the "state" key, reporting whether it found one (with closed, at
// the object's end, as parseHeader says). The header is checked when the
// key is found. It is the reference parseHeader is proven against
// (FuzzHeaderParsersAgree), and what parseHeader runs when a key is escaped
// or spelled in another case: field by field, each value decoded by
// encoding/json.
func decodeHeader(dec *json.Decoder, closed bool) (Header, bool, error) {
	var h Header
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h, false, Damaged("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return h, false, corruptIO(err)
		}
		key, _ := tok.(string)
		if key == "state" {
			if closed {
				return h, false, Damaged("malformed header: a state among the fields")
			}
			return h, true, h.Check()
		}
		dst := h.field(key)
		if dst == nil {
			dst = new(json.RawMessage)
		}
		if err := dec.Decode(dst); err != nil {
			return h, false, corruptIO(err)
		}
	}
	if closed {
		if _, err := dec.Token(); err != nil {
			return h, false, corruptIO(err)
		}
		return h, true, h.Check()
	}
	return h, false, Damaged("no state")
}

// field returns where the value of the header field key decodes to, or
// nil if key names no field before the state.
func (h *Header) field(key string) any {
	switch key {
	case "format":
		return &h.Format
	case "schema":
		return &h.Schema
	case "step":
		return &h.Step
	case "kind":
		return &h.Kind
	case "time":
		return &h.Time
	case "meta":
		return &h.Meta
	case "metrics":
		return &h.Metrics
	case "error":
		return &h.Error
	}
	return nil
}

// Check validates the fields every envelope must have.
func (h *Header) Check() error {
	switch {
	case !SupportedFormat(h.Format):
		return fmt.Errorf("%w: %w %d (this package reads version %d)", ErrCorrupt, ErrFormat, h.Format, Version)
	case h.Step < 0:
		return Damaged("negative step %d", h.Step)
	case h.Schema < 0:
		return Damaged("negative schema %d", h.Schema)
	case !h.Kind.Valid():
		return Damaged("unknown kind %q", h.Kind)
	case h.Time.IsZero():
		return Damaged("no save time")
	case (h.Kind == KindError) != (h.Error != nil):
		return Damaged("kind %q with error record %v", h.Kind, h.Error != nil)
	}
	return nil
}

// corruptIO classifies a read error: an operating system error (EIO, EACCES)
// is returned as it is; a decompressor's refusal of parameters it was not
// allowed (a zstd window or content too large, a dictionary) is ErrCorrupt
// but no proof of damage; anything else came from decoding damaged bytes
// (a bad gzip stream, an unexpected end of file, bad JSON) and is ErrCorrupt
// marked as damage.
func corruptIO(err error) error {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) || errors.Is(err, ErrCorrupt):
		return err
	case errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrUnknownDictionary):
		return fmt.Errorf("%w: %w: %w", ErrCorrupt, ErrUnsupported, err)
	}
	return Damaged("%w", err)
}

// ErrShortHeader means the bytes end before the header does: read more.
var ErrShortHeader = errors.New("the header goes on past the bytes read")

// splitHeader finds the top-level "state" key in data, the first bytes of
// a decompressed checkpoint, without decoding anything: it returns where
// the key starts (the header's fields are the bytes before it) and where
// it ends (its colon and value follow). exact reports whether the header's
// fields can be decoded as a struct with the meaning decodeHeader gives
// them; it is false, and splitHeader stops, at the first key that is
// escaped or spelled like a field in another case (json.Unmarshal matches
// names regardless of case, and an escaped key may be "state";
// decodeHeader neither). The values before "state" are only skipped:
// decoding them checks them.
//
// It returns ErrShortHeader if data ends first, and an ErrCorrupt error if
// data is not an object or the object ends without a "state" key. With
// closed, the object's end stands for the key (keyStart is the closing
// brace, keyEnd after it), and a "state" key or bytes after the object
// are ErrCorrupt.
func splitHeader(data []byte, closed bool) (keyStart, keyEnd int, exact bool, err error) {
	// With closed, the object's end stands for the "state" key.
	end := func(i int) (int, int, bool, error) {
		if !closed {
			return 0, 0, false, Damaged("no state")
		}
		if skipSpace(data, i+1) != len(data) {
			return 0, 0, false, Damaged("malformed header: bytes after the object")
		}
		return i, i + 1, true, nil
	}
	i := skipSpace(data, 0)
	if i == len(data) {
		return 0, 0, false, ErrShortHeader
	}
	if data[i] != '{' {
		return 0, 0, false, Damaged("not a JSON object")
	}
	for i, first := i+1, true; ; first = false {
		if i = skipSpace(data, i); i == len(data) {
			return 0, 0, false, ErrShortHeader
		}
		if data[i] == '}' {
			if !first {
				return 0, 0, false, Damaged("malformed header: a comma before the object's end")
			}
			return end(i)
		}
		start := i
		if i, err = skipString(data, i); err != nil {
			return 0, 0, false, err
		}
		key := data[start+1 : i-1]
		if string(key) == "state" {
			if closed {
				return 0, 0, false, Damaged("malformed header: a state among the fields")
			}
			return start, i, true, nil
		}
		if bytes.IndexByte(key, '\\') >= 0 || headerField(key) && !exactField(key) {
			return 0, 0, false, nil
		}
		if i = skipSpace(data, i); i == len(data) {
			return 0, 0, false, ErrShortHeader
		}
		if data[i] != ':' {
			return 0, 0, false, Damaged("malformed header: no colon after key %s", data[start:i])
		}
		if i, err = skipValue(data, skipSpace(data, i+1)); err != nil {
			return 0, 0, false, err
		}
		if i = skipSpace(data, i); i == len(data) {
			return 0, 0, false, ErrShortHeader
		}
		switch data[i] {
		case ',':
			i++
		case '}':
			return end(i)
		default:
			return 0, 0, false, Damaged("malformed header: %q after a value", data[i])
		}
	}
}

var headerFields = [...]string{"format", "schema", "step", "kind", "time", "meta", "metrics", "error", "state"}

// headerField reports whether key names a header field in any case.
func headerField(key []byte) bool {
	for _, f := range headerFields {
		if bytes.EqualFold(key, []byte(f)) {
			return true
		}
	}
	return false
}

// exactField reports whether key is a header field spelled exactly.
func exactField(key []byte) bool {
	for _, f := range headerFields {
		if string(key) == f {
			return true
		}
	}
	return false
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset after the JSON string that starts at i.
func skipString(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, ErrShortHeader
	}
	if data[i] != '"' {
		return 0, Damaged("malformed header: %q where a key should be", data[i])
	}
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, ErrShortHeader
}

// skipValue returns the offset after the JSON value that starts at i:
// a string, an object or an array (with what they hold), or a number or
// literal, whose bytes it does not check.
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, ErrShortHeader
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				end, err := skipString(data, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, ErrShortHeader
	}
	for ; i < len(data); i++ {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i, nil
		}
	}
	return 0, ErrShortHeader
}

// ParseHeader decodes the header of data, the first bytes of a
// decompressed checkpoint, and returns it, checked, with the offset just
// after the "state" key. An incomplete header is ErrShortHeader. data is
// changed during the call, and restored.
//
// It is the one header decoder: List (ReadHeader), a buffered load
// (ParseEnvelope), a streamed load (readHeader) and the store's header
// index (DecodeHeaderJSON) all decode headers with it. It means what
// decodeHeader, which decodes field by field, means, and is faster
// (BenchmarkParseHeader measures it): the fields before "state" are decoded
// at once as a struct when splitHeader says that is the same, by fastHeader
// when they are of the plainest form; FuzzHeaderParsersAgree proves the two
// agree.
func ParseHeader(data []byte) (Header, int, error) { return parseHeader(data, false) }

// parseHeader is ParseHeader; with closed, data is an object of the
// fields alone, whose end stands where the "state" key would (see
// DecodeHeaderJSON), and the offset returned is after it.
func parseHeader(data []byte, closed bool) (Header, int, error) {
	keyStart, keyEnd, exact, err := splitHeader(data, closed)
	if err != nil {
		return Header{}, 0, err
	}
	if !exact {
		dec := json.NewDecoder(bytes.NewReader(data))
		h, found, err := decodeHeader(dec, closed)
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			err = ErrShortHeader
		case err == nil && !found:
			err = Damaged("no state")
		case err == nil && closed && skipSpace(data, int(dec.InputOffset())) != len(data):
			err = Damaged("malformed header: bytes after the object")
		}
		return h, int(dec.InputOffset()), err
	}
	var h Header
	if fastHeader(data[:keyStart], &h) {
		return h, keyEnd, h.Check()
	}
	return unmarshalHeader(data, keyStart, keyEnd, closed)
}

// unmarshalHeader is parseHeader's decoding of exactly spelled fields that
// fastHeader cannot read, by encoding/json, as one struct. (A function of
// its own: the Header encoding/json decodes into is on the heap, and
// parseHeader's stays on the stack.)
func unmarshalHeader(data []byte, keyStart, keyEnd int, closed bool) (Header, int, error) {
	var h Header
	if closed {
		if err := json.Unmarshal(data[:keyEnd], &h); err != nil {
			return h, 0, corruptIO(err)
		}
		return h, keyEnd, h.Check()
	}
	// The fields are the object up to the key, closed where its comma is.
	head := bytes.TrimRight(data[:keyStart], " \t\r\n")
	if last := len(head) - 1; head[last] == ',' {
		head[last] = '}'
		err := json.Unmarshal(head, &h)
		head[last] = ','
		if err != nil {
			return h, 0, corruptIO(err)
		}
	}
	return h, keyEnd, h.Check()
}

// DecodeHeaderJSON decodes j, a header marshalled by encoding/json on its
// own (a JSON object of the fields before "state", as the store's header
// index holds it), as ParseHeader decodes the same fields in a
// checkpoint, and checks it: the object's end stands where the "state"
// key would.
func DecodeHeaderJSON(j []byte) (Header, error) {
	h, _, err := parseHeader(j, true)
	if errors.Is(err, ErrShortHeader) {
		err = Damaged("malformed header: the object does not end")
	}
	return h, err
}

// fastHeader decodes the header fields in head, the object up to the
// "state" key, which splitHeader found well formed and exactly spelled,
// without encoding/json, when they are the fields every header has, and
// metrics, with values of the plainest form: integers of digits, a kind of
// printable ASCII without escapes, a time of the characters RFC 3339 uses,
// metrics of such names and JSON numbers (see fastMetrics). It reports
// false, leaving h partly set, for anything else (meta, an error record,
// another key, another form of value): json.Unmarshal decides those. What
// it accepts it decodes as json.Unmarshal does (the time by the same
// UnmarshalJSON, a metric by the same strconv.ParseFloat): List parses the
// header of every file in the directory, and encoding/json's reflection
// would be most of that cost.
func fastHeader(head []byte, h *Header) bool {
	i := skipSpace(head, 0) + 1 // past the '{' splitHeader checked
	for {
		if i = skipSpace(head, i); i == len(head) {
			return true
		}
		start := i
		end, err := skipString(head, i)
		if err != nil {
			return false
		}
		key := head[start+1 : end-1]
		i = skipSpace(head, end) + 1 // past the colon
		vs := skipSpace(head, i)
		ve, err := skipValue(head, vs)
		if err != nil {
			return false
		}
		val := head[vs:ve]
		switch string(key) {
		case "format":
			n, ok := plainInt(val, strconv.IntSize)
			if !ok {
				return false
			}
			h.Format = int(n)
		case "schema":
			n, ok := plainInt(val, strconv.IntSize)
			if !ok {
				return false
			}
			h.Schema = int(n)
		case "step":
			n, ok := plainInt(val, 64)
			if !ok {
				return false
			}
			h.Step = n
		case "kind":
			if len(val) < 2 || val[0] != '"' || !printable(val[1:len(val)-1], `"\`) {
				return false
			}
			h.Kind = Kind(val[1 : len(val)-1])
		case "time":
			if len(val) < 2 || val[0] != '"' || !timeChars(val[1:len(val)-1]) || h.Time.UnmarshalJSON(val) != nil {
				return false
			}
		case "metrics":
			if !fastMetrics(val, &h.Metrics) {
				return false
			}
		default:
			return false
		}
		if i = skipSpace(head, ve); i < len(head) {
			i++ // the comma splitHeader checked
		}
	}
}

// Metrics are a header's metrics. They decode as json.Unmarshal decodes a
// map[string]float64, except that every value must be a JSON number: a
// null, a string or any other value is an error, so the header is damage
// (json.Unmarshal would read a null as 0, which would make a hand-edited
// metric the best).
type Metrics map[string]float64

// UnmarshalJSON decodes b into m, merging into what m holds.
func (m *Metrics) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if *m == nil {
		*m = make(Metrics, len(raw))
	}
	for k, v := range raw {
		if !isJSONNumber(v) {
			return fmt.Errorf("metric %q is not a number: %.40s", k, v)
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fmt.Errorf("metric %q: %w", k, err)
		}
		(*m)[k] = f
	}
	return nil
}

// fastMetrics decodes val, the value of a header's "metrics" key, into
// *m as json.Unmarshal does (into the map *m already is, if a key came
// twice), when it is an object of keys of printable ASCII without escapes
// and values that are JSON numbers which fit a float64; it reports false
// for anything else, for json.Unmarshal to decide.
func fastMetrics(val []byte, m *Metrics) bool {
	if len(val) == 0 || val[0] != '{' {
		return false
	}
	out := *m
	if out == nil {
		out = make(map[string]float64)
	}
	i := skipSpace(val, 1)
	if i < len(val) && val[i] == '}' {
		*m = out
		return skipSpace(val, i+1) == len(val)
	}
	for {
		end, err := skipString(val, i)
		if err != nil || !printable(val[i+1:end-1], `"\`) {
			return false
		}
		key := val[i+1 : end-1]
		if i = skipSpace(val, end); i == len(val) || val[i] != ':' {
			return false
		}
		vs := skipSpace(val, i+1)
		ve, err := skipValue(val, vs)
		if err != nil || !isJSONNumber(val[vs:ve]) {
			return false
		}
		f, err := strconv.ParseFloat(string(val[vs:ve]), 64)
		if err != nil {
			return false
		}
		out[string(key)] = f
		if i = skipSpace(val, ve); i == len(val) {
			return false
		}
		switch val[i] {
		case ',':
			i = skipSpace(val, i+1)
		case '}':
			*m = out
			return skipSpace(val, i+1) == len(val)
		default:
			return false
		}
	}
}

// isJSONNumber reports whether b is a number as JSON spells one.
func isJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// plainInt returns val, an integer of bits bits written as JSON writes
// one (an optional minus, then 0 or digits not starting with 0), and
// reports whether val was one.
func plainInt(val []byte, bits int) (int64, bool) {
	digits := val
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(val), 10, bits)
	return n, err == nil
}

// printable reports whether b is printable ASCII without any of except.
func printable(b []byte, except string) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || strings.IndexByte(except, c) >= 0 {
			return false
		}
	}
	return true
}

// timeChars reports whether b holds only characters of an RFC 3339 time.
func timeChars(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || c == '-' || c == ':' || c == '.' || c == '+' || c == 'T' || c == 'Z' || c == 't' || c == 'z') {
			return false
		}
	}
	return true
}
