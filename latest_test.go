package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	s := openStore[int](t, dir, checkpoint.SaveEvery(0), checkpoint.WithRolling())
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

// A store opened with the wrong layout on a directory of another layout's
// checkpoints is ErrInvalid naming that layout and how to open it, for
// Latest and LatestClean, never ErrNotFound (a fresh start).
func TestWrongLayoutIsNotAFreshStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.NoSync())
	for turn := int64(1); turn <= 3; turn++ {
		_, err := w.Save(ctx, turn, int(turn))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())

	s := openStore[int](t, dir, checkpoint.NoSync())
	for name, latest := range map[string]func(context.Context) (int, checkpoint.Info, error){"Latest": s.Latest, "LatestClean": s.LatestClean} {
		_, _, err := latest(ctx)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, name)
		require.NotErrorIs(t, err, checkpoint.ErrNotFound, "%s: ErrNotFound would mean a fresh start", name)
		require.ErrorContains(t, err, `no checkpoint of this store's layout step/8, but 3 files of layout turn/3 (turn_003.json): open the store with WithLayout("turn", 3)`)
	}
	// The right layout still opens the directory as it was.
	v, _, err := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly()).Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

// The other layout is recognised from every file it names, not from its
// newest alone: a truncated newest checkpoint, or a damaged rolling file,
// beside good ones is still no fresh start.
func TestWrongLayoutWithADamagedNewestFileIsNotAFreshStart(t *testing.T) {
	t.Parallel()
	for damaged, good := range map[string]string{"turn_020.json": "turn_019.json", "turn_last.json": "turn_020.json"} {
		t.Run(damaged, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			w := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.SaveEvery(1), checkpoint.WithRolling(), checkpoint.NoSync())
			for turn := int64(1); turn <= 20; turn++ {
				_, err := w.Save(ctx, turn, int(turn))
				require.NoError(t, err)
			}
			if damaged == "turn_last.json" {
				require.NoError(t, w.Close())
				w = openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.SaveEvery(100), checkpoint.WithRolling(), checkpoint.NoSync())
				_, _, err := w.Tick(ctx, 21, 21)
				require.NoError(t, err)
			}
			require.NoError(t, w.Close())
			path := filepath.Join(dir, damaged)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, data[:len(data)/3], 0o644))

			s := openStore[int](t, dir, checkpoint.NoSync())
			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, checkpoint.ErrInvalid)
			require.NotErrorIs(t, err, checkpoint.ErrNotFound, "ErrNotFound would mean a fresh start")
			require.ErrorContains(t, err, `files of layout turn/3 (`+good+`): open the store with WithLayout("turn", 3)`)
		})
	}
}

// A side file whose name looks like another layout's checkpoint is no
// checkpoint: a store beside it starts fresh.
func TestFreshStoreWithSideFileNamedLikeACheckpointStartsFresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	writeRaw(t, filepath.Join(dir, "report_2024.json"), `{"year":2024}`)
	s := openStore[int](t, dir, checkpoint.NoSync())
	_, _, err := s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "a side file is no checkpoint of another layout")

	// A store whose only checkpoint is an error checkpoint: LatestClean
	// finds nothing clean, in the right layout.
	_, err = s.SaveError(ctx, 1, 1, fmt.Errorf("boom"))
	require.NoError(t, err)
	_, _, err = s.LatestClean(ctx)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

// When none of many checkpoints loads, Latest's error is ErrCorrupt (never
// ErrNotFound) of a few lines: it counts them, names the newest, and lists
// the first few with how many more.
func TestLatestErrorOfManyDamagedFilesIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// 200 damaged files, where a line per file would make a long error.
	for step := 1; step <= 200; step++ {
		writeRaw(t, filepath.Join(dir, fmt.Sprintf("step_%08d.json", step)), "damaged")
	}
	s := openStore[int](t, dir, checkpoint.NoSync(), checkpoint.ReadOnly())
	_, _, err := s.Latest(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.NotErrorIs(t, err, checkpoint.ErrNotFound)
	msg := err.Error()
	require.Less(t, len(msg), 2000, "a few lines, not one per file:\n%s", msg)
	require.Contains(t, msg, "none of the 200 checkpoints loads")
	require.Contains(t, msg, "step_00000200.json", "the newest is named")
	require.True(t, strings.HasSuffix(msg, "\nand 195 more"), msg)
	require.Len(t, strings.Split(msg, "\n"), checkpoint.MaxListed+1)
}

func writeRaw(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// A directory of thousands of checkpoints, saved out of order, is read in
// several batches of entries: Latest still finds the highest step, falls
// back past it when it is damaged, and LatestClean passes over an error
// checkpoint of a higher step.
func TestLatestFindsTheNewestAmongThousandsOfCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	const files = 1500 // 60 KB of directory entries: two reads of the scan's buffer
	for i := int64(0); i < files; i++ {
		step := i * 7919 % files // every step once, out of order
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(files-1), info.Step)
	require.Equal(t, files-1, v)

	_, err = s.SaveError(ctx, files, files, fmt.Errorf("diverged"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("step_%08d.json", files-1)), []byte(`{"format":2,"st`), 0o644))
	_, info, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, info.Kind)
	require.Equal(t, int64(files), info.Step)
	v, info, err = s.LatestClean(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(files-2), info.Step, "the damaged step is passed over")
	require.Equal(t, files-2, v)
}
