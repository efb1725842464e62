package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

func TestGzipAndZstdTogetherAreInvalid(t *testing.T) {
	t.Parallel()
	_, err := Open[int](t.TempDir(), Gzip(), Zstd())
	require.ErrorIs(t, err, ErrInvalid)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "open", e.Op)
	require.Contains(t, err.Error(), "Gzip and Zstd")
}

func TestZstdCheckpointBehindASkippableFrameWasMovedAsideAsDamaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A skippable frame is valid zstd (zstd -d skips it; tools put
	// metadata in one). A checkpoint behind one is intact: it loads, and a
	// save of its step is ErrExists, never a move aside.
	skippable := []byte{0x5a, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'm', 'e', 't', 'a'}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(4<<20))
	require.NoError(t, err)
	env := envelopeBytes(header{Format: 1, Step: 1, Kind: KindStep, Time: time.Now()}, []byte(`7`))
	file := append(append(skippable, enc.EncodeAll(env, nil)...), skippable...)
	dir := t.TempDir()
	path := filepath.Join(dir, "step_00000001.json.zst")
	require.NoError(t, os.WriteFile(path, file, 0o644))

	s := openStore[int](t, dir, NoSync())
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, 1, list[0].Format, "the header reads")
	v, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 7, v)
	_, err = s.Save(ctx, 1, 8)
	require.ErrorIs(t, err, ErrExists)
	requireUntouched(t, path, file)
}

func TestZstdBombIsCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := header{Format: 1, Step: 1, Kind: KindStep, Time: time.Now()}
	// 8 MiB of state that compresses to a few hundred bytes.
	state, err := json.Marshal(strings.Repeat("a", 8<<20))
	require.NoError(t, err)
	bomb := encodeBytes(h, state, compressZstd)
	require.Less(t, len(bomb), 4<<10)

	// A frame that declares a window far beyond what our encoder uses
	// (maxZstdWindow) is refused before it is given memory, under any
	// read limit, and is no proof of damage.
	var wide bytes.Buffer
	enc, err := zstd.NewWriter(&wide, zstd.WithWindowSize(64<<20), zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	_, err = enc.Write(envelopeBytes(h, state))
	require.NoError(t, err)
	require.NoError(t, enc.Close())

	for name, file := range map[string][]byte{"expands past the limit": bomb, "declares a huge window": wide.Bytes()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "step_00000001.json.zst")
			require.NoError(t, os.WriteFile(path, file, 0o644))
			s := openStore[string](t, dir, WithMaxReadSize(1<<20), NoSync())
			_, _, err := s.Load(ctx, 1)
			require.ErrorIs(t, err, ErrCorrupt)
			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, ErrCorrupt)
			_, err = s.Save(ctx, 1, "replacement")
			require.ErrorIs(t, err, ErrExists, "a file that may be good is never moved aside")
			require.NoFileExists(t, path+quarantineSuffix)
			big := openStore[string](t, dir, ReadOnly())
			got, _, err := big.Load(ctx, 1)
			if name == "declares a huge window" {
				require.ErrorIs(t, err, errUnsupported)
				return
			}
			// The same file loads under a limit that fits it.
			require.NoError(t, err)
			require.Len(t, got, 8<<20)
		})
	}
}

func TestZstdFilesAreReadByTheZstdTool(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("zstd is not installed")
	}
	ctx := context.Background()
	s := openStore[gameState](t, t.TempDir(), Zstd())
	for _, step := range []int64{1, 2} { // a 10 KB and a 3 MB state: one block, many
		st := sampleState(step)
		if step == 2 {
			st.Log = []string{strings.Repeat("a long log line ", 200<<10)}
		}
		info, err := s.Save(ctx, step, st)
		require.NoError(t, err)
		out, err := exec.Command("zstd", "-dc", info.Path).Output()
		require.NoError(t, err)
		_, err = verify(out)
		require.NoError(t, err)
		require.True(t, bytes.Contains(out, []byte(`"state":{"turn":`+string(rune('0'+step)))))
	}
}

func TestEncodedStateIsWhatMarshalWrites(t *testing.T) {
	t.Parallel()
	c := newCodec(compressNone, DefaultMaxReadSize)
	for _, v := range []any{
		sampleState(3),
		map[string]any{"html": "<b>&</b>", "float": 1.5, "nil": nil},
		json.RawMessage(`{"raw": [1, 2]}`),
		"\u2028 line separator",
		42,
	} {
		want, err := json.Marshal(v)
		require.NoError(t, err)
		buf, err := c.EncodeState(v)
		require.NoError(t, err)
		require.Equal(t, string(want), buf.String())
		c.PutBuffer(buf)
	}
	_, err := c.EncodeState(nil)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = c.EncodeState(make(chan int))
	require.ErrorIs(t, err, ErrInvalid)
}

// TestSaveDoesNotCopyTheEncodedState proves that, once the store's buffers
// and compressors are warm, a save allocates far less than its state (about
// 3 KB for a 1 MiB state): the encoded state lives in a reused buffer and is
// hashed and written (or compressed) where it lies.
func TestSaveDoesNotCopyTheEncodedState(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	ctx := context.Background()
	state := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	for name, opts := range map[string][]Option{"plain": {NoSync()}, "gzip": {NoSync(), Gzip()}, "zstd": {NoSync(), Zstd()}} {
		t.Run(name, func(t *testing.T) {
			s := openStore[string](t, t.TempDir(), opts...)
			step := int64(0)
			save := func() {
				_, err := s.Save(ctx, step, state)
				require.NoError(t, err)
				step++
			}
			// A collection would empty the buffer pools (as it should,
			// when the store is idle): keep it from running.
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			save() // warm the buffers and the compressor
			const saves = 30
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; i < saves; i++ {
				save()
			}
			runtime.ReadMemStats(&after)
			perSave := (after.TotalAlloc - before.TotalAlloc) / saves
			t.Logf("%d bytes allocated per save of a %d-byte state", perSave, len(state))
			// One copy of the state would be 1 MiB per save. (A pool
			// keeps a buffer per processor, so a save that moves to
			// another one may still grow a fresh buffer, once.)
			require.Less(t, perSave, uint64(len(state)/2))
		})
	}
}

// TestLargeStatesRoundTrip saves states large enough to span many
// compressed blocks and buffer sizes, in every compression, and loads them
// back.
func TestLargeStatesRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, opts := range map[string][]Option{"plain": nil, "gzip": {Gzip()}, "zstd": {Zstd()}, "zstd async": {Zstd(), Async(2)}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openStore[[]string](t, t.TempDir(), opts...)
			var want [][]string
			for step := int64(0); step < 3; step++ {
				var st []string
				for i := 0; i < 20000*int(step+1); i++ {
					st = append(st, strings.Repeat(string(rune('a'+i%26)), i%40))
				}
				want = append(want, st)
				_, err := s.Save(ctx, step, st)
				require.NoError(t, err)
			}
			require.NoError(t, s.Flush(ctx))
			for step, st := range want {
				got, _, err := s.Load(ctx, int64(step))
				require.NoError(t, err)
				require.Equal(t, st, got)
			}
		})
	}
}
