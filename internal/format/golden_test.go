package format_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/format/corpus"
	"github.com/stretchr/testify/require"
)

// The files in testdata/v1 were written by this package when format version 1
// was current, and those in testdata/v2 when version 2 was. They must load
// forever: never regenerate or edit them. A new format version gets a new
// directory beside them, and these tests grow (corpus.GoldenFormats). The
// store's golden tests load them through a store too.

type goldenState = corpus.GoldenState

var (
	goldenStateAt = corpus.GoldenStateAt
	goldenFiles   = corpus.GoldenFiles
	goldenFormats = corpus.GoldenFormats
)

func goldenDir(version int) string { return corpus.GoldenDir(".", version) }

// decompress returns a file's decompressed bytes.
func decompress(t *testing.T, data []byte) []byte {
	t.Helper()
	r, _, release, err := format.NewCodec(format.CompressNone, goldenMaxRead).Open(bytes.NewReader(data))
	require.NoError(t, err)
	defer release()
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

// TestGoldenDecodes reads every golden file as List (its header), a
// buffered and a streamed load do: the header it was written with and
// the state.
func TestGoldenDecodes(t *testing.T) {
	t.Parallel()
	for _, version := range goldenFormats {
		for _, g := range goldenFiles {
			t.Run(fmt.Sprintf("v%d/%s", version, g.Name), func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join(goldenDir(version), g.Name))
				require.NoError(t, err)
				require.Equal(t, g.Comp, format.Sniff(data))
				c := format.NewCodec(format.CompressNone, goldenMaxRead)
				h, err := c.ReadHeader(bytes.NewReader(data))
				require.NoError(t, err)
				require.Equal(t, g.Header(version), h)

				var buffered goldenState
				err = c.Read(bytes.NewReader(data), int64(len(data)), func(h format.Header, state []byte) error {
					require.Equal(t, g.Header(version), h)
					return (&format.Schema{}).Decode(h.Schema, state, &buffered)
				})
				require.NoError(t, err)
				require.Equal(t, goldenStateAt(g.Step), buffered)

				var streamed goldenState
				reopen := func() (io.ReadCloser, int64, error) {
					return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
				}
				h, err = c.LoadState(bytes.NewReader(data), int64(len(data)), &format.Schema{}, func(format.Header) error { return nil }, &streamed, reopen)
				require.NoError(t, err)
				require.Equal(t, g.Header(version), h)
				require.Equal(t, goldenStateAt(g.Step), streamed)
			})
		}
	}
}

// goldenMaxRead is a store's default read limit.
const goldenMaxRead = 1 << 30

// encodeState returns a state's bytes as a store writes them.
func encodeState(v any) ([]byte, error) {
	buf, err := format.NewCodec(format.CompressNone, goldenMaxRead).EncodeState(v)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// encodeBytes returns the checkpoint of h and state, compressed with comp.
func encodeBytes(h format.Header, state []byte, comp format.Compression) []byte {
	var buf bytes.Buffer
	if err := format.NewCodec(comp, goldenMaxRead).WriteEnvelope(&buf, h, state); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// TestWriteGolden writes in testdata/vN, N the version asked for, each
// file of goldenFiles that it lacks. It never rewrites a file that exists,
// and runs only when asked:
// CHECKPOINT_WRITE_GOLDEN=v2 go test -run WriteGolden
func TestWriteGolden(t *testing.T) {
	t.Parallel()
	want := os.Getenv("CHECKPOINT_WRITE_GOLDEN")
	version := slices.IndexFunc(goldenFormats, func(f int) bool { return want == fmt.Sprintf("v%d", f) })
	if version < 0 {
		t.Skip("golden files are written once per format version")
	}
	version = goldenFormats[version]
	dir := goldenDir(version)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, g := range goldenFiles {
		path := filepath.Join(dir, g.Name)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		state, err := encodeState(goldenStateAt(g.Step))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, encodeBytes(g.Header(version), state, g.Comp), 0o644))
	}
}

// TestGoldenWriterUnchanged proves that today's writer still produces every
// format version byte for byte (a store writes the newest; the older ones
// only here), so a format cannot drift unnoticed. (Gzip and zstd bytes may
// differ between compressor versions, so compressed files are compared
// after decompression, and today's compressed output must decompress to
// the same bytes.)
func TestGoldenWriterUnchanged(t *testing.T) {
	t.Parallel()
	for _, version := range goldenFormats {
		for _, g := range goldenFiles {
			t.Run(fmt.Sprintf("v%d/%s", version, g.Name), func(t *testing.T) {
				onDisk, err := os.ReadFile(filepath.Join(goldenDir(version), g.Name))
				require.NoError(t, err)
				want := decompress(t, onDisk)

				state, err := encodeState(goldenStateAt(g.Step))
				require.NoError(t, err)
				require.Equal(t, string(want), string(encodeBytes(g.Header(version), state, format.CompressNone)))
				require.Equal(t, string(want), string(decompress(t, encodeBytes(g.Header(version), state, g.Comp))))
			})
		}
	}
}

// TestGoldenCompressedFilesAreStandard checks that the compressed golden
// files are what the command-line tools read: one gzip member, one zstd
// frame, detected by their magic numbers. If zstd or gzip is installed, it
// decompresses them with it.
func TestGoldenCompressedFilesAreStandard(t *testing.T) {
	t.Parallel()
	for _, version := range goldenFormats {
		for _, g := range goldenFiles {
			if g.Comp == format.CompressNone {
				continue
			}
			t.Run(fmt.Sprintf("v%d/%s", version, g.Name), func(t *testing.T) {
				path := filepath.Join(goldenDir(version), g.Name)
				onDisk, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, g.Comp, format.Sniff(onDisk))
				tool := map[format.Compression]string{format.CompressGzip: "gzip", format.CompressZstd: "zstd"}[g.Comp]
				if _, err := exec.LookPath(tool); err != nil {
					t.Skipf("%s is not installed", tool)
				}
				out, err := exec.Command(tool, "-dc", path).Output()
				require.NoError(t, err)
				require.Equal(t, decompress(t, onDisk), out)
				_, err = format.Verify(out)
				require.NoError(t, err)
			})
		}
	}
}

// TestGoldenIsDocumentedFormat checks the README's recipe for verifying a
// checkpoint without this package, on a golden file of each format: the
// checksum after `,"checksum":"` covers every byte before it, SHA-256 in
// format 1, CRC-32C (Castagnoli, big-endian hex) in format 2.
func TestGoldenIsDocumentedFormat(t *testing.T) {
	t.Parallel()
	sums := map[int]func([]byte) string{
		1: func(b []byte) string { d := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(d[:]) },
		2: func(b []byte) string {
			return fmt.Sprintf("crc32c:%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		},
	}
	for _, version := range goldenFormats {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(goldenDir(version), "turn_007.json"))
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(b, []byte(fmt.Sprintf(`{"format":%d,`, version))))
			i := bytes.LastIndex(b, []byte(`,"checksum":"`))
			require.Positive(t, i)
			require.Equal(t, `,"checksum":"`+sums[version](b[:i])+"\"}\n", string(b[i:]))
			_, err = format.Verify(b)
			require.NoError(t, err)
			b[3] ^= 1
			_, err = format.Verify(b)
			require.ErrorIs(t, err, format.ErrCorrupt)
		})
	}
}
