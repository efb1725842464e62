package format

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"
)

// defaultMaxRead is the store's default read limit (DefaultMaxReadSize).
const defaultMaxRead = 1 << 30

// encodeBytes returns the checkpoint of h and state, compressed with comp.
func encodeBytes(h Header, state []byte, comp Compression) []byte {
	var buf bytes.Buffer
	if err := NewCodec(comp, defaultMaxRead).WriteEnvelope(&buf, h, state); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// encodeState returns a state's bytes as a store writes them.
func encodeState(v any) ([]byte, error) {
	buf, err := NewCodec(CompressNone, defaultMaxRead).EncodeState(v)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// envelope is a whole checkpoint, its state still encoded.
type envelope struct {
	Header
	State json.RawMessage
}

// readEnvelope reads and verifies a whole checkpoint, as a load does.
func readEnvelope(r io.Reader, max int64) (envelope, error) {
	var env envelope
	err := NewCodec(CompressNone, max).Read(r, -1, func(h Header, state []byte) error {
		env = envelope{Header: h, State: bytes.Clone(state)}
		return nil
	})
	return env, err
}

// withTrailer completes an envelope body of format 1 (everything before the
// checksum) with a correct checksum, so that only what the body says is
// wrong.
func withTrailer(body string) []byte {
	sum := sha256.New()
	sum.Write([]byte(body))
	return AppendTrailer([]byte(body), TrailerV1, sum)
}

type corpusState struct {
	Turn   int64             `json:"turn"`
	Agents map[string]string `json:"agents"`
	Log    []string          `json:"log"`
}

func corpusStateAt(turn int64) corpusState {
	return corpusState{Turn: turn, Agents: map[string]string{"dm": "narrates", "ana": "sneaks"}, Log: []string{"a", "b"}}
}

// errNotFound stands for the store's ErrNotFound: a load's header check
// refuses a file of another step with it.
var errNotFound = errors.New("checkpoint not found")

// corpusMaxRead is the read limit of the corpus (streamCorpus): small, so
// that the bomb and the oversized file stay cheap to build.
const corpusMaxRead = 64 << 10

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}
