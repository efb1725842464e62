package checkpoint_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

func TestGzipAndZstdTogetherAreInvalid(t *testing.T) {
	t.Parallel()
	_, err := checkpoint.Open[int](t.TempDir(), checkpoint.Gzip(), checkpoint.Zstd())
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	var e *checkpoint.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "open", e.Op)
	require.Contains(t, err.Error(), "Gzip and Zstd")
}

func TestZstdCheckpointBehindASkippableFrameLoadsAndIsNeverMovedAside(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A skippable frame is valid zstd (zstd -d skips it; tools put
	// metadata in one). A checkpoint behind one is intact: it loads, and a
	// save of its step is ErrExists, never a move aside.
	skippable := []byte{0x5a, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'm', 'e', 't', 'a'}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(4<<20))
	require.NoError(t, err)
	env := envelopeBytes(format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`7`))
	file := append(append(skippable, enc.EncodeAll(env, nil)...), skippable...)
	dir := t.TempDir()
	path := filepath.Join(dir, "step_00000001.json.zst")
	require.NoError(t, os.WriteFile(path, file, 0o644))

	s := openStore[int](t, dir, checkpoint.NoSync())
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, 1, list[0].Format, "the header reads")
	v, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 7, v)
	_, err = s.Save(ctx, 1, 8)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	requireUntouched(t, path, file)
}

func TestZstdFilesAreReadByTheZstdTool(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("zstd is not installed")
	}
	ctx := context.Background()
	s := openStore[gameState](t, t.TempDir(), checkpoint.Zstd())
	for _, step := range []int64{1, 2} { // a 10 KB and a 3 MB state: one block, many
		st := sampleState(step)
		if step == 2 {
			st.Log = []string{strings.Repeat("a long log line ", 200<<10)}
		}
		info, err := s.Save(ctx, step, st)
		require.NoError(t, err)
		out, err := exec.Command("zstd", "-dc", info.Path).Output()
		require.NoError(t, err)
		_, err = format.Verify(out)
		require.NoError(t, err)
		require.True(t, bytes.Contains(out, []byte(`"state":{"turn":`+string(rune('0'+step)))))
	}
}

// TestLargeStatesRoundTrip saves states large enough to span many
// compressed blocks and buffer sizes, in every compression, and loads them
// back.
func TestLargeStatesRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, opts := range map[string][]checkpoint.Option{"plain": nil, "gzip": {checkpoint.Gzip()}, "zstd": {checkpoint.Zstd()}, "zstd async": {checkpoint.Zstd(), checkpoint.Async(2)}} {
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

func TestMixedCompressionStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	plain := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3))
	for turn := int64(1); turn <= 2; turn++ {
		_, err := plain.Save(ctx, turn, sampleState(turn))
		require.NoError(t, err)
	}
	require.NoError(t, plain.Close())

	gz := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.Gzip())
	info, err := gz.Save(ctx, 3, sampleState(3))
	require.NoError(t, err)
	require.Equal(t, "turn_003.json.gz", info.Name())
	raw, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.Equal(t, format.GzipMagic, raw[:2])
	require.NoError(t, gz.Close())

	zs := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.Zstd())
	info, err = zs.Save(ctx, 4, sampleState(4))
	require.NoError(t, err)
	require.Equal(t, "turn_004.json.zst", info.Name())
	raw, err = os.ReadFile(info.Path)
	require.NoError(t, err)
	require.Equal(t, format.ZstdMagic, raw[:4])
	// A step saved in another compression exists: never a second file.
	_, err = zs.Save(ctx, 3, sampleState(3))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, err = zs.Save(ctx, 1, sampleState(1))
	require.ErrorIs(t, err, checkpoint.ErrExists)

	list, err := zs.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 4)
	var comps []string
	for _, info := range list {
		comps = append(comps, info.Compression)
	}
	require.Equal(t, []string{"", "", "gzip", "zstd"}, comps)
	for turn := int64(1); turn <= 4; turn++ {
		got, _, err := zs.Load(ctx, turn)
		require.NoError(t, err)
		require.Equal(t, sampleState(turn), got)
	}
	require.NoError(t, zs.Close())

	// Compression off again: the compressed files still load.
	again := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3))
	got, info, err := again.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, "zstd", info.Compression)
	require.Equal(t, sampleState(4), got)
	got, _, err = again.Load(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, sampleState(3), got)
}
