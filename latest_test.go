package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

func TestLatestSkipsCorruptNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var reported []error
	s := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) { reported = append(reported, err) }}))
	for turn := int64(1); turn <= 3; turn++ {
		_, err := s.Save(ctx, turn, sampleState(turn))
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "turn_003.json"), []byte(`{"format":1,"st`), 0o644))
	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	require.Equal(t, sampleState(2), got)
	require.Len(t, reported, 1)
	require.ErrorIs(t, reported[0], checkpoint.ErrCorrupt)
	require.Contains(t, reported[0].Error(), "turn_003.json")
}

func TestLatestAllCorruptReportsEveryFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	for turn := int64(1); turn <= 2; turn++ {
		info, err := s.Save(ctx, turn, 1)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(info.Path, 10))
	}
	_, _, err := s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.NotErrorIs(t, err, checkpoint.ErrNotFound)
	require.Contains(t, err.Error(), "turn_001.json")
	require.Contains(t, err.Error(), "turn_002.json")
}

func TestLatestEmptyStoreIsNotFound(t *testing.T) {
	t.Parallel()
	s := openStore[int](t, t.TempDir())
	_, _, err := s.Latest(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

func TestLatestPicksHighestStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.WithLayout("t", 1))
	for _, step := range []int64{5, 100, 20, 9} { // 100 sorts before 20 by name, not by step
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 100, v)
	require.Equal(t, int64(100), info.Step)
}

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
