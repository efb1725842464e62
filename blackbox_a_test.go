package checkpoint_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/format/corpus"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// What the black-box tests of saving, loading, the format, damage and
// inspection share beyond helpers_test.go: the bytes of checkpoint files,
// the state of the stores whose files are damaged, and small file helpers.

// envelopeBytes returns a plain checkpoint file of header h and state, as a
// store writes one.
func envelopeBytes(h format.Header, state []byte) []byte {
	return encodeBytes(h, state, format.CompressNone)
}

// encodeBytes returns a checkpoint file of header h and state in
// compression comp, as a store writes one.
func encodeBytes(h format.Header, state []byte, comp format.Compression) []byte {
	var buf bytes.Buffer
	if err := format.NewCodec(comp, checkpoint.DefaultMaxReadSize).WriteEnvelope(&buf, h, state); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// encodeState returns a state's bytes as a store writes them.
func encodeState(v any) ([]byte, error) {
	buf, err := format.NewCodec(format.CompressNone, checkpoint.DefaultMaxReadSize).EncodeState(v)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// decompress returns a file's decompressed bytes.
func decompress(t *testing.T, data []byte) []byte {
	t.Helper()
	r, _, release, err := format.NewCodec(format.CompressNone, checkpoint.DefaultMaxReadSize).Open(bytes.NewReader(data))
	require.NoError(t, err)
	defer release()
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

// corpusState is the state of the stores whose files the damage tests
// replace.
type corpusState struct {
	Turn   int64             `json:"turn"`
	Agents map[string]string `json:"agents"`
	Log    []string          `json:"log"`
}

func corpusStateAt(turn int64) corpusState {
	return corpusState{Turn: turn, Agents: map[string]string{"dm": "narrates", "ana": "sneaks"}, Log: []string{"a", "b"}}
}

// mustRead returns the bytes of the file at path.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// compressLike compresses raw as a store of compression comp writes.
func compressLike(t *testing.T, comp string, raw []byte) []byte {
	t.Helper()
	switch comp {
	case "gzip":
		return corpus.Gzipped(raw)
	case "zstd":
		enc, err := zstd.NewWriter(nil)
		require.NoError(t, err)
		defer enc.Close()
		return enc.EncodeAll(raw, nil)
	}
	return raw
}

// withTrailerV2 completes an envelope body (everything before the
// checksum) with format 2's correct checksum.
func withTrailerV2(body string) []byte {
	sum := format.TrailerV2.Sum()
	sum.Write([]byte(body))
	return format.AppendTrailer([]byte(body), format.TrailerV2, sum)
}

// requireUntouched checks that the file at path still holds before and
// was not moved aside.
func requireUntouched(t *testing.T, path string, before []byte) {
	t.Helper()
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoFileExists(t, path+checkpoint.QuarantineSuffix)
}

// touch makes a file of each name in dir, holding "x".
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
}

// stepsOf returns the steps of infos, in their order.
func stepsOf(infos []checkpoint.Info) []int64 {
	var out []int64
	for _, i := range infos {
		out = append(out, i.Step)
	}
	return out
}

// openSessionsRoot opens a root of sessions with NoSync, as openStore does,
// and closes it when t ends.
func openSessionsRoot(t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Sessions {
	t.Helper()
	r, err := checkpoint.OpenSessions(dir, append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}
