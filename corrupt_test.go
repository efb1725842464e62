package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"
)

// The corrupt-file corpus: every way this test can think of to damage a
// checkpoint or put something hostile where one should be. In every case a
// load fails with ErrCorrupt (or ErrNotFound where there is no checkpoint at
// all), never panics, never returns a wrong state, and Latest falls back to
// the good checkpoint of step 1.

type corpusState struct {
	Turn   int64             `json:"turn"`
	Agents map[string]string `json:"agents"`
	Log    []string          `json:"log"`
}

func corpusStateAt(turn int64) corpusState {
	return corpusState{Turn: turn, Agents: map[string]string{"dm": "narrates", "ana": "sneaks"}, Log: []string{"a", "b"}}
}

// withTrailer completes an envelope body of format 1 (everything before the
// checksum) with a correct checksum, so that only what the body says is
// wrong.
func withTrailer(body string) []byte {
	sum := sha256.New()
	sum.Write([]byte(body))
	return appendTrailer([]byte(body), trailerV1, sum)
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// corpusCase is one damaged step-2 file.
type corpusCase struct {
	name string
	file string // file name; step 2 of layout ("c", 3) unless stated
	data []byte
	// prepare, if set, makes the hostile entry itself instead of data.
	prepare func(t *testing.T, dir string)
}

func corruptCorpus(t *testing.T) []corpusCase {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	state, err := encodeState(corpusStateAt(2))
	require.NoError(t, err)
	good := encodeBytes(header{Format: 1, Step: 2, Kind: KindStep, Time: now}, state, compressNone)
	goodGz := encodeBytes(header{Format: 1, Step: 2, Kind: KindStep, Time: now}, state, compressGzip)

	var cases []corpusCase
	for i := 0; i < len(good); i++ {
		cases = append(cases, corpusCase{name: fmt.Sprintf("plain truncated at %d", i), file: "c_002.json", data: good[:i]})
	}
	for i := 0; i < len(goodGz); i++ {
		cases = append(cases, corpusCase{name: fmt.Sprintf("gzip truncated at %d", i), file: "c_002.json.gz", data: goodGz[:i]})
	}
	for i := range good {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(good)
			b[i] ^= bit
			cases = append(cases, corpusCase{name: fmt.Sprintf("plain bit %#x flipped at %d", bit, i), file: "c_002.json", data: b})
		}
	}
	for i := range goodGz {
		b := bytes.Clone(goodGz)
		b[i] ^= 0x01
		cases = append(cases, corpusCase{name: fmt.Sprintf("gzip bit flipped at %d", i), file: "c_002.json.gz", data: b})
	}

	head := `{"format":1,"step":2,"kind":"step","time":"2026-11-21T10:00:00Z"`
	body := head + `,"state":` + string(state)
	for _, tc := range []struct{ name, body string }{
		{"step is a string", strings.Replace(body, `"step":2`, `"step":"2"`, 1)},
		{"step is a float", strings.Replace(body, `"step":2`, `"step":2.5`, 1)},
		{"step disagrees with the name", strings.Replace(body, `"step":2`, `"step":3`, 1)},
		{"negative step", strings.Replace(body, `"step":2`, `"step":-2`, 1)},
		{"kind is a number", strings.Replace(body, `"kind":"step"`, `"kind":5`, 1)},
		{"unknown kind", strings.Replace(body, `"kind":"step"`, `"kind":"weekly"`, 1)},
		{"kind disagrees with the name", strings.Replace(body, `"kind":"step"`, `"kind":"final"`, 1)},
		{"time is not a time", strings.Replace(body, `"2026-11-21T10:00:00Z"`, `"yesterday"`, 1)},
		{"no time", strings.Replace(body, `,"time":"2026-11-21T10:00:00Z"`, ``, 1)},
		{"meta is a list", strings.Replace(body, `,"state":`, `,"meta":[1,2],"state":`, 1)},
		{"error record on a step checkpoint", strings.Replace(body, `,"state":`, `,"error":{"message":"x"},"state":`, 1)},
		{"format 3", strings.Replace(body, `"format":1`, `"format":3`, 1)},
		{"format 2 with the checksum of format 1", strings.Replace(body, `"format":1`, `"format":2`, 1)},
		{"format 0", strings.Replace(body, `"format":1`, `"format":0`, 1)},
		{"format is a string", strings.Replace(body, `"format":1`, `"format":"1"`, 1)},
		{"no format", strings.Replace(body, `"format":1,`, ``, 1)},
		{"state is null", head + `,"state":null`},
		{"state is a string", head + `,"state":"turn 2"`},
		{"state is a list", head + `,"state":[1,2]`},
		{"state field of the wrong type", head + `,"state":{"turn":"two","agents":{},"log":[]}`},
		{"state agents of the wrong type", head + `,"state":{"turn":2,"agents":[1],"log":[]}`},
		{"no state", head},
		{"not an object", `[` + body[1:]},
		{"two objects", body + `}{"x":1`},
	} {
		cases = append(cases, corpusCase{name: "checksummed, " + tc.name, file: "c_002.json", data: withTrailer(tc.body)})
		cases = append(cases, corpusCase{name: "checksummed gzip, " + tc.name, file: "c_002.json.gz", data: gzipped(t, withTrailer(tc.body))})
	}

	badCRC := bytes.Clone(goodGz)
	badCRC[len(badCRC)-8] ^= 0xff // the CRC-32 of the gzip trailer
	badSize := bytes.Clone(goodGz)
	badSize[len(badSize)-1] ^= 0xff // ISIZE
	cases = append(cases,
		corpusCase{name: "empty file", file: "c_002.json", data: []byte{}},
		corpusCase{name: "empty gzip name", file: "c_002.json.gz", data: []byte{}},
		corpusCase{name: "gzip magic only", file: "c_002.json.gz", data: []byte{0x1f, 0x8b}},
		corpusCase{name: "gzip with a bad CRC", file: "c_002.json.gz", data: badCRC},
		corpusCase{name: "gzip with a bad size", file: "c_002.json.gz", data: badSize},
		corpusCase{name: "gzip of nothing", file: "c_002.json.gz", data: gzipped(t, nil)},
		corpusCase{name: "gzip of plain garbage", file: "c_002.json.gz", data: gzipped(t, []byte("garbage"))},
		corpusCase{name: "gzip bomb", file: "c_002.json.gz", data: gzipped(t, append(withTrailer(head+`,"state":"`), bytes.Repeat([]byte("A"), corpusMaxRead*4)...))},
		corpusCase{name: "plain file over the read limit", file: "c_002.json", data: withTrailer(head + `,"state":{"turn":2,"log":["` + strings.Repeat("x", corpusMaxRead) + `"]}`)},
		corpusCase{name: "NUL bytes", file: "c_002.json", data: make([]byte, 4096)},
		corpusCase{name: "the checkpoint of another step", file: "c_002.json", data: encodeBytes(header{Format: 1, Step: 9, Kind: KindStep, Time: now}, state, compressNone)},
		corpusCase{name: "a directory", file: "c_002.json", prepare: func(t *testing.T, dir string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "c_002.json"), 0o755))
		}},
	)
	if canSymlink(t) {
		cases = append(cases,
			corpusCase{name: "a symlink to a good checkpoint outside", file: "c_002.json", prepare: func(t *testing.T, dir string) {
				outside := filepath.Join(t.TempDir(), "c_002.json")
				require.NoError(t, os.WriteFile(outside, good, 0o644))
				require.NoError(t, os.Symlink(outside, filepath.Join(dir, "c_002.json")))
			}},
			corpusCase{name: "a symlink to the good checkpoint of step 1", file: "c_002.json", prepare: func(t *testing.T, dir string) {
				require.NoError(t, os.Symlink("c_001.json", filepath.Join(dir, "c_002.json")))
			}},
			corpusCase{name: "a dangling symlink", file: "c_002.json", prepare: func(t *testing.T, dir string) {
				require.NoError(t, os.Symlink("../../../../etc/passwd", filepath.Join(dir, "c_002.json")))
			}},
		)
	}
	if haveFIFOs {
		cases = append(cases, corpusCase{name: "a FIFO", file: "c_002.json", prepare: func(t *testing.T, dir string) {
			mkfifo(t, filepath.Join(dir, "c_002.json"))
		}})
	}
	return cases
}

// corpusMaxRead is the read limit of the corpus stores: small, so that the
// bomb and the oversized file stay cheap to build.
const corpusMaxRead = 64 << 10

func TestCorruptCorpus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want1 := corpusStateAt(1)
	want2 := corpusStateAt(2)
	cases := corruptCorpus(t)
	root := t.TempDir()
	survivedIntact := 0
	for i, tc := range cases {
		dir := filepath.Join(root, fmt.Sprint(i))
		w := openStore[corpusState](t, dir, WithLayout("c", 3))
		_, err := w.Save(ctx, 1, want1)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		if tc.prepare != nil {
			tc.prepare(t, dir)
		} else {
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.file), tc.data, 0o644))
		}

		s := openStore[corpusState](t, dir, WithLayout("c", 3), WithMaxReadSize(corpusMaxRead), ReadOnly())
		got, _, err := s.Load(ctx, 2)
		switch {
		case err == nil:
			// Damage that changes no byte that matters (a gzip header
			// field) may load, but only as the right state.
			require.Equal(t, want2, got, tc.name)
			survivedIntact++
		default:
			require.ErrorIs(t, err, ErrCorrupt, tc.name)
			var e *Error
			require.ErrorAs(t, err, &e, tc.name)
			require.Equal(t, int64(2), e.Step, tc.name)
			require.Equal(t, filepath.Join(dir, tc.file), e.Path, tc.name)
		}
		list, err := s.List(ctx)
		require.NoError(t, err, tc.name)
		require.NotEmpty(t, list, tc.name)

		got, info, err := s.Latest(ctx)
		require.NoError(t, err, tc.name)
		if info.Step == 2 {
			require.Equal(t, want2, got, tc.name)
		} else {
			require.Equal(t, int64(1), info.Step, tc.name)
			require.Equal(t, want1, got, tc.name)
		}
		require.NoError(t, s.Close())
	}
	t.Logf("%d corrupt or hostile files tried: none panicked or returned a wrong state; %d harmless (gzip header) changes loaded the right state", len(cases), survivedIntact)
	require.Greater(t, len(cases), 1000)
}

func TestLoadInfoNeverLeavesTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent := t.TempDir()
	other := openStore[int](t, filepath.Join(parent, "other"), WithLayout("c", 3))
	outside, err := other.Save(ctx, 5, 666)
	require.NoError(t, err)

	s := openStore[int](t, filepath.Join(parent, "mine"), WithLayout("c", 3))
	_, err = s.Save(ctx, 1, 1)
	require.NoError(t, err)
	// An Info of another store's file: its name is looked up in this
	// store's directory only.
	_, _, err = s.LoadInfo(ctx, outside)
	require.ErrorIs(t, err, ErrNotFound)
	for _, path := range []string{"../other/c_005.json", "/etc/passwd", filepath.Join(parent, "other", "..", "..")} {
		_, _, err = s.LoadInfo(ctx, Info{Step: 5, Path: path, Format: 1})
		require.Error(t, err, path)
		require.True(t, errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid), "%s: %v", path, err)
	}
}

// fussyState has a decoder of its own, which records the bytes it is given
// and, like many hand-written decoders, trusts their shape: a byte the
// writer never puts there makes it index past its input.
type fussyState struct{ Turn int }

// fussySeen collects every input fussyState.UnmarshalJSON was given, by
// the test that set it (the key: a marker inside the state).
var fussySeen sync.Map

func (f *fussyState) UnmarshalJSON(b []byte) error {
	var v struct {
		Turn int    `json:"turn"`
		Mark string `json:"mark"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if seen, ok := fussySeen.Load(v.Mark[:4]); ok {
		seen.(*sync.Map).Store(string(b), true)
	}
	if v.Mark[4] != 'z' {
		_ = b[len(b)] // the host's own bug: index out of range
	}
	f.Turn = v.Turn
	return nil
}

func (f fussyState) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"turn":%d,"mark":"%sz"}`, f.Turn, fussyMark(f.Turn)), nil
}

func fussyMark(turn int) string { return fmt.Sprintf("m%03d", turn%1000) }

// A flipped byte inside the state of the newest checkpoint keeps it valid
// JSON: only the checksum tells. The state type's UnmarshalJSON must never
// see those bytes (it would panic on them), and Latest falls back past the
// file.
func TestDamagedBytesNeverReachTheStateTypesDecoder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for i, opts := range [][]Option{nil, {Gzip()}, {Zstd()}} {
		seen := new(sync.Map)
		base := 100 + i*10
		for turn := base; turn < base+2; turn++ {
			fussySeen.Store(fussyMark(turn), seen)
		}
		dir := t.TempDir()
		s := openStore[fussyState](t, dir, opts...)
		_, err := s.Save(ctx, 1, fussyState{Turn: base})
		require.NoError(t, err)
		info, err := s.Save(ctx, 2, fussyState{Turn: base + 1})
		require.NoError(t, err)
		raw := decompress(t, mustRead(t, info.Path))
		k := bytes.Index(raw, []byte(`z"}`))
		require.Positive(t, k)
		raw[k] = 'y' // the marker byte the decoder trusts
		require.NoError(t, os.WriteFile(info.Path, compressLike(t, info.Compression, raw), 0o644))

		var got fussyState
		require.NotPanics(t, func() { got, info, err = s.Latest(ctx) })
		require.NoError(t, err)
		require.Equal(t, int64(1), info.Step)
		require.Equal(t, base, got.Turn)
		require.NotPanics(t, func() { _, _, err = s.Load(ctx, 2) })
		require.ErrorIs(t, err, ErrCorrupt)
		require.True(t, isDamage(err), "%v", err)
		seen.Range(func(k, _ any) bool {
			require.NotContains(t, k.(string), `y"}`, "the state type's decoder saw a file whose checksum fails")
			return true
		})
	}
}
