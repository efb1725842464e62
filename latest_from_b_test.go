package checkpoint_test

import (
	"context"
	"os"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

func TestDamagedRollingFileIsNotAFreshStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.Every(0), checkpoint.WithRolling())
	info, _, err := s.Tick(ctx, 3, 3)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(info.Path, []byte("garbage"), 0o644))
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.NotErrorIs(t, err, checkpoint.ErrNotFound)
	// It is listed (its step unknown), so a host can see it.
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, checkpoint.KindRolling, list[0].Kind)
	// A later good checkpoint wins over it.
	_, err = s.Save(ctx, 4, 4)
	require.NoError(t, err)
	v, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, v)
}
