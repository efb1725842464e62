package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
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

// Saves stamped at once, queued and synchronous, on a clock stuck within a
// round and far behind a time seen in the directory, each get a time of
// their own.
func TestConcurrentSavesNeverShareASaveTime(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var round atomic.Int64
	now := func() time.Time { return base.Add(time.Duration(round.Load()) * time.Second) } // stuck within a round
	s := openStore[int](t, t.TempDir(), checkpoint.NoSync(), checkpoint.WithClock(now))
	const rounds, workers, each = 200, 4, 50
	times := make([][]time.Time, workers)
	for r := range int64(rounds) {
		round.Store(r)
		// A checkpoint saved an hour ahead was loaded: the clock is far
		// behind, so a synchronous save reads the directory for its
		// step's newest time, a while in which others may stamp.
		s.Observe(now().Add(time.Hour))
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range each {
					tm := s.SaveTime(1, w%2 == 0) // a queued save and a synchronous one
					times[w] = append(times[w], tm)
				}
			})
		}
		wg.Wait()
	}
	all := slices.Concat(times...)
	slices.SortFunc(all, time.Time.Compare)
	distinct := len(slices.CompactFunc(all, time.Time.Equal))
	require.Equal(t, rounds*workers*each, distinct, "every save gets a time of its own")
}

// TestCheckpointsOfAStepSavedAtOneInstantOrderByKind pins the tie-break of
// checkpoints of one step whose save times are equal (written by two
// processes, or copied in): step, rolling, final, then error attempts in
// order, whatever their compression.
func TestCheckpointsOfAStepSavedAtOneInstantOrderByKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rec := &checkpoint.ErrorRecord{Message: "boom", Step: 5, Time: at}
	files := map[string][]byte{
		"step_00000005.json.gz":      encodeBytes(format.Header{Format: 1, Step: 5, Kind: checkpoint.KindStep, Time: at}, []byte("1"), format.CompressGzip),
		"step_last.json":             envelopeBytes(format.Header{Format: 1, Step: 5, Kind: checkpoint.KindRolling, Time: at}, []byte("2")),
		"step_00000005.final.json":   envelopeBytes(format.Header{Format: 1, Step: 5, Kind: checkpoint.KindFinal, Time: at}, []byte("3")),
		"step_00000005.error-2.json": envelopeBytes(format.Header{Format: 1, Step: 5, Kind: checkpoint.KindError, Time: at, Error: rec}, []byte("5")),
		"step_00000005.error.json":   encodeBytes(format.Header{Format: 1, Step: 5, Kind: checkpoint.KindError, Time: at, Error: rec}, []byte("4"), format.CompressZstd),
	}
	for name, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	s := openStore[int](t, dir, checkpoint.ReadOnly())
	list, err := s.List(ctx)
	require.NoError(t, err)
	var names []string
	for _, info := range list {
		names = append(names, info.Name())
	}
	require.Equal(t, []string{"step_00000005.json.gz", "step_last.json", "step_00000005.final.json", "step_00000005.error.json", "step_00000005.error-2.json"}, names)
	v, _, err := s.Load(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, 5, v, "Load returns the last error attempt")
	v, _, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, v)
	v, info, err := s.LatestClean(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v, "LatestClean returns the final checkpoint")
	require.Equal(t, checkpoint.KindFinal, info.Kind)
}

// The time in the header of a damaged checkpoint (a year no encoding
// takes, or a flipped bit's) is never taken as a save time seen: the saves
// after it are stamped by the clock.
func TestDamagedHeaderTimeDoesNotLeakIntoSaveTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, when := range map[string]string{
		"unencodable year": "9999-12-31T23:59:59.999999999Z",
		"flipped year bit": "6026-11-21T10:00:00Z",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bad := `{"format":1,"step":5,"kind":"step","time":"` + when + `","state":1,"checksum":"sha256:` + strings.Repeat("0", 64) + "\"}\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000005.json"), []byte(bad), 0o644))
			s := openStore[int](t, dir)
			_, err := s.Save(ctx, 4, 4)
			require.NoError(t, err)
			_, err = s.List(ctx)
			require.NoError(t, err)
			_, info, err := s.Latest(ctx) // skips the damaged step 5
			require.NoError(t, err)
			require.Equal(t, int64(4), info.Step)
			saved, err := s.Save(ctx, 5, 5) // the replayed step
			require.NoError(t, err)
			require.Less(t, saved.Time.Year(), 3000)
		})
	}
}

// A time seen beyond what a header can encode is ignored: saves go on.
func TestObservedTimesBeyondEncodingAreIgnored(t *testing.T) {
	t.Parallel()
	s := openStore[int](t, t.TempDir())
	s.Observe(checkpoint.TimeMax)
	_, err := s.Save(context.Background(), 1, 1)
	require.NoError(t, err, "a verified file from a clock gone mad must not stop all saves")
}
