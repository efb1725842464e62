package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/stretchr/testify/require"
)

// A store's loads stream (internal/format proves the streamed decoder
// against the buffered one); these tests prove what a store makes of it.

// A digit changed inside the state keeps it valid JSON of the right type:
// only the checksum tells. Decoding while reading must not hand it out.
func TestStreamedLoadNeverReturnsAStateThatFailsItsChecksum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, opts := range [][]checkpoint.Option{nil, {checkpoint.Gzip()}, {checkpoint.Zstd()}} {
		dir := t.TempDir()
		s := openStore[corpusState](t, dir, append(opts, checkpoint.WithLayout("c", 3))...)
		info, err := s.Save(ctx, 7, corpusStateAt(7))
		require.NoError(t, err)
		raw := decompress(t, mustRead(t, info.Path))
		i := bytes.Index(raw, []byte(`"turn":7`))
		require.Positive(t, i)
		raw[i+len(`"turn":`)] = '8'
		require.NoError(t, os.WriteFile(info.Path, compressLike(t, info.Compression, raw), 0o644))

		got, _, err := s.Load(ctx, 7)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		require.True(t, format.IsDamage(err), "%v", err)
		require.Contains(t, err.Error(), "checksum mismatch")
		require.Zero(t, got)
	}
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
	require.True(t, checkpoint.CodecOf(np).Streaming(), "a type that is not plain was streamed")
	require.False(t, checkpoint.CodecOf(np).Streams(reflect.TypeFor[notPlain]()))
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
	w := openStore[scores](t, dir, checkpoint.NoSync())
	info, err := w.Save(ctx, 1, scores{map[int]int{7: 1}})
	require.NoError(t, err)
	data, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	body := strings.Replace(string(data[:len(data)-format.TrailerLenV2]), `{"7":1}`, `{"null":1}`, 1)
	require.NoError(t, os.WriteFile(info.Path, withTrailerV2(body), 0o644))
	var want scores
	require.Error(t, json.Unmarshal([]byte(body[strings.Index(body, `"state":`)+len(`"state":`):]), &want))
	loaded, _, err := openStore[scores](t, dir, checkpoint.ReadOnly()).Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt, "the load decoded %+v", loaded)
}

func TestLoadMissingStepIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	_, _, err := s.Load(ctx, 4)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.Contains(t, err.Error(), "load step 4")
	require.Contains(t, err.Error(), dir)
	_, err = s.Save(ctx, 5, 5)
	require.NoError(t, err)
	_, _, err = s.Load(ctx, 4)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, _, err = s.Load(ctx, -1)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}

// errHostBug is what panickyState's decoder panics with.
var errHostBug = errors.New("the host's decoder is broken")

// panickyState's decoder panics on some states: with an error on turn 13,
// with a string on turn 14.
type panickyState struct{ Turn int }

func (p *panickyState) UnmarshalJSON(b []byte) error {
	var v struct{ Turn int }
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v.Turn {
	case 13:
		panic(errHostBug)
	case 14:
		panic("unlucky turn")
	}
	p.Turn = v.Turn
	return nil
}

// A panic in the state type's decoder, on a file that verified, fails that
// load with an error wrapping the panic's value (an ErrCorrupt error, as a
// decode failure is; the file is not moved aside): Latest falls back past
// it, and the store goes on and closes.
func TestPanicInTheStateTypesDecoderIsAnErrorAndCloseReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := checkpoint.Open[panickyState](dir, checkpoint.NoSync())
	require.NoError(t, err)
	for step, turn := range []int{1, 13, 14} {
		_, err := s.Save(ctx, int64(step), panickyState{Turn: turn})
		require.NoError(t, err)
	}
	var got panickyState
	var info checkpoint.Info
	require.NotPanics(t, func() { got, info, err = s.Latest(ctx) })
	require.NoError(t, err)
	require.Equal(t, int64(0), info.Step)
	require.Equal(t, 1, got.Turn)

	require.NotPanics(t, func() { got, _, err = s.Load(ctx, 1) })
	require.ErrorIs(t, err, errHostBug)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.False(t, format.IsDamage(err), "a host's panic is no proof of damage: %v", err)
	require.Contains(t, err.Error(), "panic")
	require.Zero(t, got)
	require.NotPanics(t, func() { _, _, err = s.Load(ctx, 2) })
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Contains(t, err.Error(), "unlucky turn")
	require.FileExists(t, filepath.Join(dir, "step_00000001.json"))
	// A side file read into such a type too.
	require.NoError(t, s.WriteJSON(ctx, "side.json", panickyState{Turn: 13}))
	var side panickyState
	require.NotPanics(t, func() { err = s.ReadJSON(ctx, "side.json", &side) })
	require.ErrorIs(t, err, errHostBug)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after a load whose decoder panicked")
	}
}

func TestLoadInfoReachesEveryFileOfAStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.WithLayout("turn", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(2), checkpoint.WithClock(newClock().now))
	_, err := s.Save(ctx, 4, 40)
	require.NoError(t, err)
	_, err = s.SaveFinal(ctx, 4, 41)
	require.NoError(t, err)
	_, err = s.SaveError(ctx, 4, 42, errors.New("first"))
	require.NoError(t, err)
	_, err = s.SaveError(ctx, 4, 43, errors.New("second"))
	require.NoError(t, err)
	_, _, err = s.Tick(ctx, 5, 50)
	require.NoError(t, err)

	list, err := s.List(ctx)
	require.NoError(t, err)
	var got []int
	for _, info := range list {
		v, loaded, err := s.LoadExact(ctx, info)
		require.NoError(t, err)
		require.Equal(t, info, loaded)
		got = append(got, v)
	}
	require.Equal(t, []int{40, 41, 42, 43, 50}, got)

	_, _, err = s.LoadExact(ctx, checkpoint.Info{Path: "/etc/passwd"})
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, _, err = s.LoadExact(ctx, checkpoint.Info{Path: filepath.Join(s.Location(), "turn_009.json")})
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

func TestLoadInfoOfReplacedRollingFileIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.SaveEvery(0), checkpoint.WithRolling())
	_, _, err := s.Tick(ctx, 1, 1)
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	_, _, err = s.Tick(ctx, 2, 2)
	require.NoError(t, err)
	_, _, err = s.LoadExact(ctx, list[0])
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.ErrorContains(t, err, "now holds the checkpoint of step 2")
}

// LoadExact looks an Info's name up in the store's own directory only: an
// Info of another store's file, or a path that climbs out, is ErrNotFound
// or ErrInvalid.
func TestLoadInfoNeverLeavesTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent := t.TempDir()
	other := openStore[int](t, filepath.Join(parent, "other"), checkpoint.WithLayout("c", 3))
	outside, err := other.Save(ctx, 5, 666)
	require.NoError(t, err)

	s := openStore[int](t, filepath.Join(parent, "mine"), checkpoint.WithLayout("c", 3))
	_, err = s.Save(ctx, 1, 1)
	require.NoError(t, err)
	// An Info of another store's file: its name is looked up in this
	// store's directory only.
	_, _, err = s.LoadExact(ctx, outside)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	for _, path := range []string{"../other/c_005.json", "/etc/passwd", filepath.Join(parent, "other", "..", "..")} {
		_, _, err = s.LoadExact(ctx, checkpoint.Info{Step: 5, Path: path, Format: 1})
		require.Error(t, err, path)
		require.True(t, errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrInvalid), "%s: %v", path, err)
	}
}
