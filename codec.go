package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"time"

	"github.com/klauspost/compress/gzip"
)

// formatVersion is the envelope format this package writes. Loads accept
// exactly the versions listed in supportedFormat.
const formatVersion = 1

func supportedFormat(v int) bool { return v == 1 }

// maxHeaderSize bounds how much of a file List reads to find its header.
const maxHeaderSize = 1 << 20

// The checksum trailer closes every envelope:
//
//	,"checksum":"sha256:<64 lower-case hex digits>"}\n
//
// The digest covers every byte of the (decompressed) file before the trailer:
// the header and the state's exact bytes.
const (
	trailerPrefix = `,"checksum":"sha256:`
	trailerSuffix = "\"}\n"
	trailerLen    = len(trailerPrefix) + sha256.Size*2 + len(trailerSuffix)
)

// header is the part of the envelope that precedes the state. The field order
// here is the order on disk.
type header struct {
	Format int               `json:"format"`
	Step   int64             `json:"step"`
	Kind   Kind              `json:"kind"`
	Time   time.Time         `json:"time"`
	Meta   map[string]string `json:"meta,omitempty"`
	Error  *ErrorRecord      `json:"error,omitempty"`
}

// envelope is a whole decoded checkpoint with its state still encoded.
type envelope struct {
	header
	State json.RawMessage `json:"state"`
}

var gzipMagic = []byte{0x1f, 0x8b}

// errFormat marks a file of a format version this package cannot read: it
// may be perfectly good for a newer version, so it is never quarantined.
var errFormat = errors.New("unsupported format version")

// errTooLarge marks a file larger than the read limit: it may be good.
var errTooLarge = errors.New("larger than the read limit")

// encodeState encodes an application state. The result is what the checksum
// covers and what a load decodes.
func encodeState(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode state: %w", ErrInvalid, err)
	}
	if string(b) == "null" {
		return nil, fmt.Errorf("%w: encode state: the state is nil", ErrInvalid)
	}
	return b, nil
}

// writeEnvelope writes a whole checkpoint to w, gzip-compressed if gz.
func writeEnvelope(w io.Writer, h header, state []byte, gz bool) error {
	head, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode header: %w", err)
	}
	// Reopen the header object to append the state and the trailer.
	head = append(head[:len(head)-1], `,"state":`...)

	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(w)
		w = zw
	}
	sum := sha256.New()
	for _, part := range [][]byte{head, state} {
		sum.Write(part)
		if _, err := w.Write(part); err != nil {
			return err
		}
	}
	if _, err := w.Write(appendTrailer(nil, sum)); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

func appendTrailer(b []byte, sum hash.Hash) []byte {
	b = append(b, trailerPrefix...)
	b = hex.AppendEncode(b, sum.Sum(nil))
	return append(b, trailerSuffix...)
}

// uncompressed returns a reader of r's decompressed bytes: r itself for a
// plain file, a gzip reader for a compressed one (detected by its magic
// number, not its name).
func uncompressed(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if !bytes.Equal(magic, gzipMagic) {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, corruptIO(fmt.Errorf("gzip header: %w", err))
	}
	return zr, nil
}

// readEnvelope reads, verifies and decodes a whole checkpoint, reading at most
// max decompressed bytes. It returns an ErrCorrupt error for anything wrong
// with the bytes, and an operating system error as it is.
func readEnvelope(r io.Reader, max int64) (envelope, error) {
	var env envelope
	ur, err := uncompressed(r)
	if err != nil {
		return env, err
	}
	data, err := io.ReadAll(io.LimitReader(ur, max+1))
	if err != nil {
		return env, corruptIO(err)
	}
	if int64(len(data)) > max {
		return env, fmt.Errorf("%w: %w of %d bytes (see WithMaxReadSize)", ErrCorrupt, errTooLarge, max)
	}
	if err := verify(data); err != nil {
		return env, err
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return env, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	// The state is the last field, as written: a field after it could say
	// something else than the header List reads (which stops at "state").
	body := data[:len(data)-trailerLen]
	if !bytes.HasSuffix(body, env.State) || !bytes.HasSuffix(body[:len(body)-len(env.State)], []byte(`"state":`)) {
		return env, fmt.Errorf("%w: the state is not the last field", ErrCorrupt)
	}
	if err := env.header.check(); err != nil {
		return env, err
	}
	if len(env.State) == 0 || string(env.State) == "null" {
		return env, fmt.Errorf("%w: no state", ErrCorrupt)
	}
	return env, nil
}

// verify checks the checksum trailer of a decompressed checkpoint.
func verify(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty file", ErrCorrupt)
	}
	n := len(data) - trailerLen
	if n < 0 || string(data[n:n+len(trailerPrefix)]) != trailerPrefix || string(data[len(data)-len(trailerSuffix):]) != trailerSuffix {
		return fmt.Errorf("%w: no checksum trailer (truncated file?)", ErrCorrupt)
	}
	want := data[n+len(trailerPrefix) : len(data)-len(trailerSuffix)]
	sum := sha256.Sum256(data[:n])
	var got [sha256.Size * 2]byte
	hex.Encode(got[:], sum[:])
	if !bytes.Equal(got[:], want) {
		return fmt.Errorf("%w: checksum mismatch: file says sha256:%s, content is sha256:%s", ErrCorrupt, want, got)
	}
	return nil
}

// readHeader decodes the header of a checkpoint without reading its state:
// it stops at the "state" key. Nothing is verified; a load does that.
func readHeader(r io.Reader) (header, error) {
	var h header
	ur, err := uncompressed(r)
	if err != nil {
		return h, err
	}
	dec := json.NewDecoder(io.LimitReader(ur, maxHeaderSize))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h, fmt.Errorf("%w: not a JSON object", ErrCorrupt)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return h, corruptIO(err)
		}
		var dst any
		switch tok {
		case "state":
			return h, h.check()
		case "format":
			dst = &h.Format
		case "step":
			dst = &h.Step
		case "kind":
			dst = &h.Kind
		case "time":
			dst = &h.Time
		case "meta":
			dst = &h.Meta
		case "error":
			dst = &h.Error
		default:
			dst = new(json.RawMessage)
		}
		if err := dec.Decode(dst); err != nil {
			return h, corruptIO(err)
		}
	}
	return h, fmt.Errorf("%w: no state", ErrCorrupt)
}

// check validates the fields every envelope must have.
func (h *header) check() error {
	switch {
	case !supportedFormat(h.Format):
		return fmt.Errorf("%w: %w %d (this package reads version %d)", ErrCorrupt, errFormat, h.Format, formatVersion)
	case h.Step < 0:
		return fmt.Errorf("%w: negative step %d", ErrCorrupt, h.Step)
	case !h.Kind.valid():
		return fmt.Errorf("%w: unknown kind %q", ErrCorrupt, h.Kind)
	case h.Time.IsZero():
		return fmt.Errorf("%w: no save time", ErrCorrupt)
	case (h.Kind == KindError) != (h.Error != nil):
		return fmt.Errorf("%w: kind %q with error record %v", ErrCorrupt, h.Kind, h.Error != nil)
	}
	return nil
}

// corruptIO classifies a read error: an operating system error (EIO, EACCES)
// is returned as it is; anything else came from decoding damaged bytes
// (a bad gzip stream, an unexpected end of file, bad JSON) and is ErrCorrupt.
func corruptIO(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) || errors.Is(err, ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}
