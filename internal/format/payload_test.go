package format

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var payloadTime = time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)

// writePayload returns the checkpoint of a byte payload, written in
// pieces of at most piece bytes.
func writePayload(t testing.TB, comp Compression, h Header, payload []byte, piece int) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := NewCodec(comp, defaultMaxRead).WritePayload(&buf, h, func(w io.Writer) error {
		for rest := payload; len(rest) > 0; {
			k := min(piece, len(rest))
			if _, err := w.Write(rest[:k]); err != nil {
				return err
			}
			rest = rest[k:]
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(len(payload)), n)
	return buf.Bytes()
}

// readPayload reads a byte payload the streaming way: its header, its
// payload and the error that ended it (nil for a clean end).
func readPayload(data []byte, limit int64) (Header, []byte, error) {
	h, p, _, err := NewCodec(CompressNone, limit).OpenPayload(bytes.NewReader(data), int64(len(data)), func(Header) error { return nil })
	if err != nil {
		return h, nil, err
	}
	defer p.Close()
	got, err := io.ReadAll(p)
	return h, got, err
}

// headersEqual reports whether two headers of payloads are the same.
func headersEqual(h, o Header) bool {
	return h.Format == o.Format && h.Step == o.Step && h.Kind == o.Kind && h.Time.Equal(o.Time) && fmt.Sprint(h.Meta) == fmt.Sprint(o.Meta)
}

func payloadHeader(step int64) Header {
	return Header{Format: PayloadVersion, Step: step, Kind: KindStep, Time: payloadTime, Meta: map[string]string{"term": "4"}}
}

// TestPayloadRoundTrips proves that a payload reads back byte for byte
// whatever its size (around the trailer's length, which the reader holds
// back, and its buffer's), its content (bytes that look like a trailer,
// like JSON, nothing at all) and its compression, written in pieces of
// any size.
func TestPayloadRoundTrips(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	trailerLike := []byte(`,"checksum":"crc32c:00000000"}` + "\n")
	payloads := map[string][]byte{
		"empty":        {},
		"one":          {0},
		"trailer-1":    random(TrailerLenV2 - 1),
		"trailer":      random(TrailerLenV2),
		"trailer+1":    random(TrailerLenV2 + 1),
		"buffer":       random(payloadBufSize),
		"buffer+7":     random(payloadBufSize + 7),
		"large":        random(300 << 10),
		"trailer-like": bytes.Repeat(trailerLike, 3),
		"json":         []byte(`{"a":1}`),
	}
	for _, comp := range Compressions {
		for name, payload := range payloads {
			for _, piece := range []int{1, 4096, 1 << 20} {
				if piece == 1 && len(payload) > 64<<10 {
					continue
				}
				t.Run(fmt.Sprintf("%v/%s/%d", comp, name, piece), func(t *testing.T) {
					data := writePayload(t, comp, payloadHeader(7), payload, piece)
					require.Equal(t, comp, Sniff(data))
					h, got, err := readPayload(data, defaultMaxRead)
					require.NoError(t, err)
					require.Equal(t, payloadHeader(7), h)
					require.True(t, bytes.Equal(payload, got), "payload differs")
					// List's header reader and the buffered read agree.
					lh, err := NewCodec(CompressNone, defaultMaxRead).ReadHeader(bytes.NewReader(data))
					require.NoError(t, err)
					require.Equal(t, h, lh)
					require.NoError(t, NewCodec(CompressNone, defaultMaxRead).Read(bytes.NewReader(data), -1, func(rh Header, state []byte) error {
						require.Equal(t, h, rh)
						require.Nil(t, state, "a payload's bytes are verified as they stream, not handed over")
						return nil
					}))
				})
			}
		}
	}
}

// TestPayloadSizeOfAPlainFile proves that OpenPayload tells the payload's
// size from a plain file's size, and does not guess it for a compressed
// one.
func TestPayloadSizeOfAPlainFile(t *testing.T) {
	t.Parallel()
	for _, comp := range Compressions {
		data := writePayload(t, comp, payloadHeader(1), make([]byte, 1000), 100)
		_, p, size, err := NewCodec(CompressNone, defaultMaxRead).OpenPayload(bytes.NewReader(data), int64(len(data)), func(Header) error { return nil })
		require.NoError(t, err)
		p.Close()
		if comp == CompressNone {
			require.Equal(t, int64(1000), size)
		} else {
			require.Equal(t, int64(-1), size)
		}
	}
}

// TestPayloadDamageNeverEndsCleanly proves that a byte payload with any
// one byte changed, or cut short anywhere, never reads to a clean end: the
// stream ends with an ErrCorrupt error marked as damage, at its opening or
// at its end. So does the buffered read (Codec.Read), and a load of a
// state (LoadState).
func TestPayloadDamageNeverEndsCleanly(t *testing.T) {
	t.Parallel()
	for _, comp := range Compressions {
		want := []byte("raft snapshot bytes, opaque")
		good := writePayload(t, comp, payloadHeader(3), want, 5)
		check := func(t *testing.T, bad []byte, what string) {
			h, got, err := readPayload(bad, defaultMaxRead)
			if err == nil && comp != CompressNone && bytes.Equal(got, want) && headersEqual(h, payloadHeader(3)) {
				return // a byte of the compression's framing the content does not depend on (gzip flags, mtime, OS; a zstd descriptor)
			}
			require.Error(t, err, what)
			require.ErrorIs(t, err, ErrCorrupt, what)
			require.True(t, IsDamage(err) || errors.Is(err, ErrFormat) || errors.Is(err, ErrUnsupported), "%s: %v", what, err)
			err = NewCodec(CompressNone, defaultMaxRead).Read(bytes.NewReader(bad), -1, func(Header, []byte) error { return nil })
			require.ErrorIs(t, err, ErrCorrupt, what)
			var v any
			_, err = NewCodec(CompressNone, defaultMaxRead).LoadState(bytes.NewReader(bad), -1, &Schema{}, func(Header) error { return nil }, &v, nil)
			require.ErrorIs(t, err, ErrCorrupt, what)
			require.NotErrorIs(t, err, ErrPayloadMismatch, what)
		}
		for i := range good {
			bad := bytes.Clone(good)
			bad[i] ^= 0x01
			check(t, bad, fmt.Sprintf("%v: byte %d flipped", comp, i))
		}
		for n := range len(good) {
			check(t, good[:n], fmt.Sprintf("%v: cut at %d", comp, n))
		}
	}
}

// TestPayloadMismatchIsNoDamage proves that a read of a state from a byte
// payload that verifies, and a read of a payload from a JSON state that
// verifies, each fail with ErrPayloadMismatch, not as damage; and that
// the name's check comes first.
func TestPayloadMismatchIsNoDamage(t *testing.T) {
	t.Parallel()
	for _, comp := range Compressions {
		payload := writePayload(t, comp, payloadHeader(3), []byte(`{"turn":3}`), 100)
		var v map[string]any
		c := NewCodec(CompressNone, defaultMaxRead)
		_, err := c.LoadState(bytes.NewReader(payload), -1, &Schema{}, func(Header) error { return nil }, &v, nil)
		require.ErrorIs(t, err, ErrPayloadMismatch)
		require.False(t, IsDamage(err))
		require.Nil(t, v)
		_, err = c.LoadState(bytes.NewReader(payload), -1, &Schema{}, func(Header) error { return errNotFound }, &v, nil)
		require.ErrorIs(t, err, errNotFound)

		state := encodeBytes(Header{Format: Version, Step: 3, Kind: KindStep, Time: payloadTime}, []byte(`{"turn":3}`), comp)
		_, _, _, err = c.OpenPayload(bytes.NewReader(state), -1, func(Header) error { return nil })
		require.ErrorIs(t, err, ErrPayloadMismatch)
		require.False(t, IsDamage(err))
		bad := bytes.Clone(state)
		if comp == CompressNone {
			bad[len(bad)-5] ^= 1
			_, _, _, err = c.OpenPayload(bytes.NewReader(bad), -1, func(Header) error { return nil })
			require.True(t, IsDamage(err), "%v", err)
		}
	}
}

// TestPayloadLimits proves that a payload larger than the read limit is
// refused by the writer (ErrInvalid: nothing a load could not read) and by
// the reader (ErrTooLarge, which is no damage).
func TestPayloadLimits(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	_, err := NewCodec(CompressNone, 100).WritePayload(&buf, payloadHeader(1), func(w io.Writer) error {
		_, err := w.Write(make([]byte, 101))
		return err
	})
	require.ErrorIs(t, err, ErrInvalid)
	buf.Reset()
	n, err := NewCodec(CompressNone, 100).WritePayload(&buf, payloadHeader(1), func(w io.Writer) error {
		_, err := w.Write(make([]byte, 100))
		return err
	})
	require.NoError(t, err)
	require.Equal(t, int64(100), n)
	_, got, err := readPayload(buf.Bytes(), 100)
	require.NoError(t, err)
	require.Len(t, got, 100)
	_, _, err = readPayload(buf.Bytes(), 99)
	require.ErrorIs(t, err, ErrTooLarge)
	require.False(t, IsDamage(err))
}

// TestPayloadWriteFailures proves that the write function's error, a
// panic in it, and a write after it returned each fail the write, and
// that a header of another format is refused.
func TestPayloadWriteFailures(t *testing.T) {
	t.Parallel()
	c := NewCodec(CompressGzip, defaultMaxRead)
	boom := errors.New("boom")
	_, err := c.WritePayload(io.Discard, payloadHeader(1), func(io.Writer) error { return boom })
	require.ErrorIs(t, err, boom)
	_, err = c.WritePayload(io.Discard, payloadHeader(1), func(io.Writer) error { panic("kaput") })
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "kaput")
	var kept io.Writer
	_, err = c.WritePayload(io.Discard, payloadHeader(1), func(w io.Writer) error { kept = w; return nil })
	require.NoError(t, err)
	_, err = kept.Write([]byte("late"))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = c.WritePayload(io.Discard, Header{Format: 2, Step: 1, Kind: KindStep, Time: payloadTime}, func(io.Writer) error { return nil })
	require.ErrorIs(t, err, ErrInvalid)
}

// TestPayloadOlderReaderSeesANewerFormat proves what a release before byte
// payloads makes of one: its header, a format it does not know, which is
// no proof of damage. (A reader of format 2 only is this package with
// SupportedFormat refusing 3; the header decoder is the same.)
func TestPayloadOlderReaderSeesANewerFormat(t *testing.T) {
	t.Parallel()
	data := writePayload(t, CompressNone, payloadHeader(5), []byte("x"), 1)
	require.True(t, strings.HasPrefix(string(data), PayloadPrefix))
	// The header, as every release decodes it, ends at the "state" key.
	h, keyEnd, err := ParseHeader(bytes.Clone(data))
	require.NoError(t, err)
	require.Equal(t, PayloadVersion, h.Format)
	require.Equal(t, `:x,"checksum":"crc32c:`, string(data[keyEnd:keyEnd+len(`:x,"checksum":"crc32c:`)]))
	h.Format = 99 // what a release that does not know format 3 sees
	err = h.Check()
	require.ErrorIs(t, err, ErrFormat)
	require.False(t, IsDamage(err))
}

// FuzzReadPayload proves the streamed read of a byte payload
// (OpenPayload) and the buffered one (ParseEnvelope) agree on any bytes:
// both accept with the same header and payload, or both fail; the
// streamed read never ends cleanly where the buffered one fails.
//
//	go test -run '^$' -fuzz FuzzReadPayload -fuzztime 60s .
func FuzzReadPayload(f *testing.F) {
	for _, comp := range Compressions {
		f.Add(writePayload(f, comp, payloadHeader(3), []byte("opaque"), 2))
	}
	f.Add(writePayload(f, CompressNone, payloadHeader(0), nil, 1))
	f.Add([]byte(`{"format":3,"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state" :x,"checksum":"crc32c:00000000"}` + "\n"))
	f.Add([]byte(`{"format":3,"format":2,"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state":1,"checksum":"crc32c:00000000"}` + "\n"))
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(data []byte) {
			h, streamed, serr := readPayload(data, limit)
			var bh Header
			var buffered []byte
			berr := NewCodec(CompressNone, limit).Read(bytes.NewReader(data), -1, func(h Header, _ []byte) error {
				bh = h
				return nil
			})
			if berr == nil {
				// The buffered read of the same decompressed bytes.
				r, _, release, err := NewCodec(CompressNone, limit).Open(bytes.NewReader(data))
				require.NoError(t, err)
				all, err := io.ReadAll(r)
				release()
				require.NoError(t, err)
				ph, state, err := ParseEnvelope(all)
				require.NoError(t, err)
				bh, buffered = ph, state
			}
			if errors.Is(serr, ErrTooLarge) || errors.Is(berr, ErrTooLarge) {
				return // the two count different bytes against the limit
			}
			if serr == nil && berr != nil {
				t.Fatalf("the stream ended cleanly where the buffered read failed: %v", berr)
			}
			if serr != nil && !errors.Is(serr, ErrCorrupt) && !errors.Is(serr, ErrPayloadMismatch) {
				t.Fatalf("stream error without ErrCorrupt: %v", serr)
			}
			if serr == nil && berr == nil {
				if !IsPayload(bh.Format) || !bytes.Equal(streamed, buffered) || !h.Time.Equal(bh.Time) || h.Step != bh.Step {
					t.Fatalf("the two reads disagree: %+v %q vs %+v %q", h, streamed, bh, buffered)
				}
			}
			if berr == nil && IsPayload(bh.Format) && serr != nil {
				t.Fatalf("the buffered read accepted a payload the stream refused: %v", serr)
			}
		}
		check(data)
		// With a correct checksum, past verification.
		sum := TrailerV2.Sum()
		sum.Write(data)
		check(AppendTrailer(bytes.Clone(data), TrailerV2, sum))
	})
}

// goldenPayload is the payload of the golden files of format 3: every
// byte value, a JSON value, and bytes that look like a trailer.
func goldenPayload() []byte {
	var b []byte
	for i := range 256 {
		b = append(b, byte(i))
	}
	b = append(b, `{"state":1},"checksum":"crc32c:00000000"}`...)
	return append(b, '\n')
}

// TestGoldenPayloadsLoad reads the golden files of format 3 in
// testdata/v3, written when byte payloads were introduced, as List (the
// header) and a load (the streamed payload, verified) do. They must load
// forever: never regenerate or edit them. The plain one is also what the
// writer writes today, byte for byte.
func TestGoldenPayloadsLoad(t *testing.T) {
	t.Parallel()
	golden := []struct {
		name string
		comp Compression
		h    Header
	}{
		{"turn_007.json", CompressNone, Header{Format: 3, Step: 7, Kind: KindStep, Time: time.Date(2026, 11, 26, 20, 0, 0, 123456789, time.UTC), Meta: map[string]string{"term": "4", "index": "1029"}}},
		{"turn_008.json.gz", CompressGzip, Header{Format: 3, Step: 8, Kind: KindStep, Time: time.Date(2026, 11, 26, 20, 0, 1, 0, time.UTC)}},
		{"turn_009.json.zst", CompressZstd, Header{Format: 3, Step: 9, Kind: KindStep, Time: time.Date(2026, 11, 26, 20, 0, 2, 0, time.UTC), Metrics: map[string]float64{"loss": 0.25}}},
	}
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "v3", g.name))
			require.NoError(t, err)
			require.Equal(t, g.comp, Sniff(data))
			h, err := NewCodec(CompressNone, defaultMaxRead).ReadHeader(bytes.NewReader(data))
			require.NoError(t, err)
			require.Equal(t, g.h, h)
			h, got, err := readPayload(data, defaultMaxRead)
			require.NoError(t, err)
			require.Equal(t, g.h, h)
			require.Equal(t, goldenPayload(), got)
			if g.comp == CompressNone {
				require.Equal(t, data, writePayload(t, CompressNone, g.h, goldenPayload(), 7), "the writer drifted from the format")
			}
		})
	}
}
