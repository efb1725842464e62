package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint/internal/format/corpus"
	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"
)

// The corrupt-file corpus: every way this test can think of to damage a
// checkpoint (internal/format/corpus, which the format's own tests read
// too) or put something hostile where one should be. In every case a
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
	state, err := encodeState(corpusStateAt(2))
	require.NoError(t, err)
	good := corpus.Good(state)
	// The damaged bytes are the format's corpus; the hostile entries
	// where a file should be are the store's.
	var cases []corpusCase
	for _, c := range corpus.Cases(state) {
		cases = append(cases, corpusCase{name: c.Name, file: c.File, data: c.Data})
	}
	cases = append(cases,
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
const corpusMaxRead = corpus.MaxRead

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
