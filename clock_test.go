package checkpoint_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// A clock that ticks coarsely (as Windows' does) gives
// two stores opened one after the other the same time, and the first
// stamps its saves 1 ns apart within it. The redo of a failed step saved
// by the second store is still stamped after the error checkpoint: Load
// returns it, and it supersedes the error checkpoint as a later redo does.
func TestRedoSavedInTheTickOfItsErrorCheckpointIsWhatLoadReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := checkpoint.WithClock(func() time.Time { return tick })
	s := openStore[int](t, dir, checkpoint.NoSync(), clock)
	_, err := s.Save(ctx, 1, 10)
	require.NoError(t, err)
	_, err = s.SaveError(ctx, 2, 20, errors.New("step 2 failed"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openStore[int](t, dir, checkpoint.NoSync(), clock)
	_, err = s.Save(ctx, 2, 21)
	require.NoError(t, err)
	v, info, err := s.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindStep, info.Kind)
	require.Equal(t, 21, v)
	v, info, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindStep, info.Kind)
	require.Equal(t, 21, v)
	require.NoError(t, s.Close())
	s = openStore[int](t, dir, checkpoint.NoSync(), clock)
	infos, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, steps(infos))
	require.Equal(t, checkpoint.KindStep, infos[1].Kind, "the redo superseded the error checkpoint")
}

// One save under a clock a year ahead does not stamp the saves after it in
// the future: they follow the clock, in the store that saved it and in a
// reopened one, so that KeepWithin still removes them as they age.
func TestSavesAfterOneStampedAYearAheadFollowTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	clock := &manualClock{t: start.Add(365 * 24 * time.Hour)}
	s := openStore[int](t, dir, checkpoint.KeepWithin(90*time.Minute), checkpoint.WithClock(clock.now))
	_, err := s.Save(ctx, 0, 0)
	require.NoError(t, err)
	for beat := int64(1); beat <= 48; beat++ {
		clock.set(start.Add(time.Duration(beat) * time.Hour))
		info, err := s.Save(ctx, beat, int(beat))
		require.NoError(t, err)
		require.Equal(t, clock.now(), info.Time, "beat %d is stamped by the clock", beat)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 47, 48}, steps(list), "the glitched save is recent until its time passes; the rest follow the clock")

	// A reopened store reads the glitched time back and still follows the
	// clock.
	require.NoError(t, s.Close())
	s = openStore[int](t, dir, checkpoint.KeepWithin(90*time.Minute), checkpoint.WithClock(clock.now))
	_, _, err = s.Load(ctx, 0)
	require.NoError(t, err)
	clock.set(clock.now().Add(time.Hour))
	info, err := s.Save(ctx, 49, 49)
	require.NoError(t, err)
	require.Equal(t, clock.now(), info.Time)
}

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
