package checkpoint_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

func TestSaveTimesGrowWhenTheClockStepsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	noon := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := openStore[int](t, dir, checkpoint.WithClock(func() time.Time { return noon }))
	_, err := s.SaveError(ctx, 5, 1, errors.New("boom"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// A new process whose clock is an hour behind resumes from the error
	// checkpoint and saves the redone step: that save is the last one.
	s = openStore[int](t, dir, checkpoint.WithClock(func() time.Time { return noon.Add(-time.Hour) }))
	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, info.Kind)
	saved, err := s.Save(ctx, 5, 2)
	require.NoError(t, err)
	require.True(t, saved.Time.After(info.Time))
	v, latest, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, checkpoint.KindStep, latest.Kind)
}
