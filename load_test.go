package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// A store's loads stream (internal/format proves the streamed decoder
// against the buffered one); these tests prove what a store makes of it.

// A digit changed inside the state keeps it valid JSON of the right type:
// only the checksum tells. Decoding while reading must not hand it out.
func TestStreamedLoadNeverReturnsAStateThatFailsItsChecksum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, opts := range [][]Option{nil, {Gzip()}, {Zstd()}} {
		dir := t.TempDir()
		s := openStore[corpusState](t, dir, append(opts, WithLayout("c", 3))...)
		info, err := s.Save(ctx, 7, corpusStateAt(7))
		require.NoError(t, err)
		raw := decompress(t, mustRead(t, info.Path))
		i := bytes.Index(raw, []byte(`"turn":7`))
		require.Positive(t, i)
		raw[i+len(`"turn":`)] = '8'
		require.NoError(t, os.WriteFile(info.Path, compressLike(t, info.Compression, raw), 0o644))

		got, _, err := s.Load(ctx, 7)
		require.ErrorIs(t, err, ErrCorrupt)
		require.True(t, isDamage(err), "%v", err)
		require.Contains(t, err.Error(), "checksum mismatch")
		require.Zero(t, got)
	}
}

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

type notPlain struct {
	Name string `json:"name"`
	//lint:ignore SA5008 misplaced on purpose: encoding/json ignores it, the streamed decoder refuses it
	List  []int       `json:"list,string"`
	Count json.Number `json:"count"`
}

// A state type that is not plain (a misplaced ",string", a json.Number)
// is never streamed: a store saves and loads it whole.
func TestStateTypesThatAreNotPlainNeverStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wantNP := notPlain{Name: "n", List: []int{1, 2}, Count: "12.50"}
	np := openStore[notPlain](t, t.TempDir())
	_, err := np.Save(ctx, 1, wantNP)
	require.NoError(t, err)
	gotNP, _, err := np.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, wantNP, gotNP)
	require.True(t, np.codec.Streaming(), "a type that is not plain was streamed")
	require.False(t, np.codec.Streams(reflect.TypeFor[notPlain]()))
}

// A store's own files mean what encoding/json means: a type with an
// ",embed" tag loads whole, and a map of integer keys whose key was made
// "null" fails to load as encoding/json fails (the format's own tests,
// TestStreamedLoadMeansWhatEncodingJSONMeans, prove the decoder).
func TestStoreLoadsMeanWhatEncodingJSONMeans(t *testing.T) {
	t.Parallel()
	// A store's own file of a type with an ",embed" tag loads whole.
	type inner struct{ A int }
	type embedTagged struct {
		Inner inner `json:",embed"`
	}
	ctx := context.Background()
	s := openStore[embedTagged](t, t.TempDir())
	_, err := s.Save(ctx, 1, embedTagged{inner{7}})
	require.NoError(t, err)
	got, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, embedTagged{inner{7}}, got)

	// A store's own file, with a correct checksum, of a map[int]int
	// whose key was made "null": the load fails as encoding/json does.
	type scores struct {
		Scores map[int]int `json:"scores"`
	}
	dir := t.TempDir()
	w := openStore[scores](t, dir, NoSync())
	info, err := w.Save(ctx, 1, scores{map[int]int{7: 1}})
	require.NoError(t, err)
	data, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	body := strings.Replace(string(data[:len(data)-trailerLenV2]), `{"7":1}`, `{"null":1}`, 1)
	require.NoError(t, os.WriteFile(info.Path, withTrailerV2(body), 0o644))
	var want scores
	require.Error(t, json.Unmarshal([]byte(body[strings.Index(body, `"state":`)+len(`"state":`):]), &want))
	loaded, _, err := openStore[scores](t, dir, ReadOnly()).Load(ctx, 1)
	require.ErrorIs(t, err, ErrCorrupt, "the load decoded %+v", loaded)
}

// withTrailerV2 completes an envelope body (everything before the
// checksum) with format 2's correct checksum.
func withTrailerV2(body string) []byte {
	sum := trailerV2.Sum()
	sum.Write([]byte(body))
	return appendTrailer([]byte(body), trailerV2, sum)
}
