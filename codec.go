package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"time"
)

// formatVersion is the envelope format this package writes. Loads accept
// exactly the versions listed in supportedFormat.
const formatVersion = 1

func supportedFormat(v int) bool { return v == 1 }

// maxHeaderSize bounds how many decompressed bytes List reads to find a
// file's header.
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
	Schema int               `json:"schema,omitempty"` // WithSchema's version; absent is 0
	Step   int64             `json:"step"`
	Kind   Kind              `json:"kind"`
	Time   time.Time         `json:"time"`
	Meta   map[string]string `json:"meta,omitempty"`
	Error  *ErrorRecord      `json:"error,omitempty"`
}

// errFormat marks a file of a format version this package cannot read: it
// may be perfectly good for a newer version, so it is never quarantined.
var errFormat = errors.New("unsupported format version")

// errTooLarge marks a file larger than the read limit: it may be good.
var errTooLarge = errors.New("larger than the read limit")

func appendTrailer(b []byte, sum hash.Hash) []byte {
	b = append(b, trailerPrefix...)
	var d [sha256.Size]byte
	b = hex.AppendEncode(b, sum.Sum(d[:0]))
	return append(b, trailerSuffix...)
}

// parseEnvelope verifies data, a whole decompressed checkpoint, and splits
// it into its header and the state's exact bytes (a part of data, not a
// copy). The header is checked; the state is only known to be there: a
// load decodes it.
func parseEnvelope(data []byte) (header, []byte, error) {
	if err := verify(data); err != nil {
		return header{}, nil, err
	}
	body := data[:len(data)-trailerLen]
	dec := json.NewDecoder(bytes.NewReader(body))
	h, found, err := decodeHeader(dec)
	if err != nil {
		return h, nil, err
	}
	if !found {
		return h, nil, fmt.Errorf("%w: no state", ErrCorrupt)
	}
	// The decoder stopped after the "state" key: the value follows its
	// colon and runs to the trailer, as the writer put it.
	rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return h, nil, fmt.Errorf("%w: no state", ErrCorrupt)
	}
	state := bytes.TrimSpace(rest[1:])
	if len(state) == 0 || string(state) == "null" {
		return h, nil, fmt.Errorf("%w: no state", ErrCorrupt)
	}
	return h, state, nil
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

// decodeHeader decodes the header fields of an envelope from dec and stops
// after the "state" key, reporting whether it found one. The header is
// checked when the key is found.
func decodeHeader(dec *json.Decoder) (header, bool, error) {
	var h header
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h, false, fmt.Errorf("%w: not a JSON object", ErrCorrupt)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return h, false, corruptIO(err)
		}
		var dst any
		switch tok {
		case "state":
			return h, true, h.check()
		case "format":
			dst = &h.Format
		case "schema":
			dst = &h.Schema
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
			return h, false, corruptIO(err)
		}
	}
	return h, false, fmt.Errorf("%w: no state", ErrCorrupt)
}

// check validates the fields every envelope must have.
func (h *header) check() error {
	switch {
	case !supportedFormat(h.Format):
		return fmt.Errorf("%w: %w %d (this package reads version %d)", ErrCorrupt, errFormat, h.Format, formatVersion)
	case h.Step < 0:
		return fmt.Errorf("%w: negative step %d", ErrCorrupt, h.Step)
	case h.Schema < 0:
		return fmt.Errorf("%w: negative schema %d", ErrCorrupt, h.Schema)
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
