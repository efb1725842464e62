package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

func TestIntactFileOverReadLimitIsNeverQuarantined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[string](t, dir)
	info, err := s.Save(ctx, 1, strings.Repeat("x", 4096))
	require.NoError(t, err)
	before, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	small := openStore[string](t, dir, checkpoint.WithMaxReadSize(1024))
	_, _, err = small.Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "read limit")
	_, err = small.Save(ctx, 1, "replacement")
	require.ErrorIs(t, err, checkpoint.ErrExists)
	after, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoFileExists(t, info.Path+".corrupt")
}

func TestZstdBombIsCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}
	// 8 MiB of state that compresses to a few hundred bytes.
	state, err := json.Marshal(strings.Repeat("a", 8<<20))
	require.NoError(t, err)
	bomb := encodeBytes(h, state, format.CompressZstd)
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
			s := openStore[string](t, dir, checkpoint.WithMaxReadSize(1<<20), checkpoint.NoSync())
			_, _, err := s.Load(ctx, 1)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			_, err = s.Save(ctx, 1, "replacement")
			require.ErrorIs(t, err, checkpoint.ErrExists, "a file that may be good is never moved aside")
			require.NoFileExists(t, path+checkpoint.QuarantineSuffix)
			big := openStore[string](t, dir, checkpoint.ReadOnly())
			got, _, err := big.Load(ctx, 1)
			if name == "declares a huge window" {
				require.ErrorIs(t, err, format.ErrUnsupported)
				return
			}
			// The same file loads under a limit that fits it.
			require.NoError(t, err)
			require.Len(t, got, 8<<20)
		})
	}
}
