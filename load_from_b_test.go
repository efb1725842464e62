package checkpoint_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

func TestLoadInfoReachesEveryFileOfAStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.WithLayout("turn", 3), checkpoint.WithRolling(), checkpoint.Every(2), checkpoint.WithClock(newClock().now))
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
		v, loaded, err := s.LoadInfo(ctx, info)
		require.NoError(t, err)
		require.Equal(t, info, loaded)
		got = append(got, v)
	}
	require.Equal(t, []int{40, 41, 42, 43, 50}, got)

	_, _, err = s.LoadInfo(ctx, checkpoint.Info{Path: "/etc/passwd"})
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, _, err = s.LoadInfo(ctx, checkpoint.Info{Path: filepath.Join(s.Dir(), "turn_009.json")})
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

func TestLoadInfoOfReplacedRollingFileIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.Every(0), checkpoint.WithRolling())
	_, _, err := s.Tick(ctx, 1, 1)
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	_, _, err = s.Tick(ctx, 2, 2)
	require.NoError(t, err)
	_, _, err = s.LoadInfo(ctx, list[0])
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.ErrorContains(t, err, "now holds the checkpoint of step 2")
}
