package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// What the internal tests of this package share of the format (package
// format) and of its files: its names, reading and writing a file's bytes,
// compressing them as a store does, and files to fill a directory.
var (
	parseEnvelope = format.ParseEnvelope
	appendTrailer = format.AppendTrailer
	zstdMagic     = format.ZstdMagic
	trailerV2     = format.TrailerV2
)

const (
	maxPooled       = format.MaxPooled
	zstdWindow      = format.ZstdWindow
	maxZstdWindow   = format.MaxZstdWindow
	maxStreamBuffer = format.MaxStreamBuffer
	streamPrefix    = format.StreamPrefix
	collectAfter    = format.CollectAfter
)

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
		return gzipped(t, raw)
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
	sum := trailerV2.Sum()
	sum.Write([]byte(body))
	return appendTrailer([]byte(body), trailerV2, sum)
}

// touch makes an empty file of each name in dir.
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
}
