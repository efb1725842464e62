package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// A writer with a retention rule stops looking for its steps in the
// compressions its directory holds none of, once a prune has read the whole
// directory: a step saved in another compression before it opened, or seen
// by a List since, still blocks a save of that step.
func TestSaveAfterAScanStillSeesOtherCompressions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	gz := openStore[gameState](t, dir, checkpoint.Gzip())
	_, err := gz.Save(ctx, 5, sampleState(5))
	require.NoError(t, err)
	require.NoError(t, gz.Close())

	plain := openStore[gameState](t, dir, checkpoint.KeepLast(10))
	_, err = plain.Save(ctx, 1, sampleState(1)) // its prune reads the directory
	require.NoError(t, err)
	_, err = plain.Save(ctx, 5, sampleState(5))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, err = plain.Save(ctx, 6, sampleState(6))
	require.NoError(t, err)

	// A store that found none: a zstd file of a step it has not saved,
	// seen by a List, blocks that step too.
	dir2 := t.TempDir()
	w := openStore[gameState](t, dir2, checkpoint.KeepLast(10))
	_, err = w.Save(ctx, 1, sampleState(1))
	require.NoError(t, err)
	zs := openStore[gameState](t, t.TempDir(), checkpoint.Zstd())
	info, err := zs.Save(ctx, 2, sampleState(2))
	require.NoError(t, err)
	raw, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir2, info.Name()), raw, 0o644))
	list, err := w.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	_, err = w.Save(ctx, 2, sampleState(2))
	require.ErrorIs(t, err, checkpoint.ErrExists)
}

func TestRollingFileHoldsTheLastStepBetweenNumberedSaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			dir := t.TempDir()
			opts := []checkpoint.Option{checkpoint.WithLayout("turn", 3), checkpoint.Every(5), checkpoint.WithRolling()}
			ext := ".json"
			if gz {
				opts = append(opts, checkpoint.Gzip())
				ext += ".gz"
			}
			rolling := "turn_last" + ext
			s := openStore[int](t, dir, opts...)
			for step := int64(1); step <= 13; step++ {
				info, ok, err := s.Tick(ctx, step, int(step))
				require.NoError(t, err)
				require.True(t, ok)
				if step%5 == 0 {
					require.Equal(t, checkpoint.KindStep, info.Kind)
				} else {
					require.Equal(t, checkpoint.KindRolling, info.Kind)
					require.Equal(t, rolling, info.Name())
				}
				// A crash now would lose no step: Latest is this one.
				v, latest, err := s.Latest(ctx)
				require.NoError(t, err)
				require.Equal(t, int(step), v)
				require.Equal(t, step, latest.Step)
			}
			require.Equal(t, []string{".checkpoint.lock", "turn_005" + ext, "turn_010" + ext, rolling}, dirNames(t, dir))
			list, err := s.List(ctx)
			require.NoError(t, err)
			require.Len(t, list, 3)
			require.Equal(t, checkpoint.KindRolling, list[2].Kind)
			require.Equal(t, int64(13), list[2].Step)
			v, _, err := s.Load(ctx, 13)
			require.NoError(t, err)
			require.Equal(t, 13, v)

			// A due step makes the numbered checkpoint the newest again.
			_, _, err = s.Tick(ctx, 15, 15)
			require.NoError(t, err)
			_, info, err := s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(15), info.Step)
			require.Equal(t, checkpoint.KindStep, info.Kind)
		})
	}
}

func TestRollingFileFollowsTheStoresCompression(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.Every(0), checkpoint.WithRolling())
	_, _, err := s.Tick(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = openStore[int](t, dir, checkpoint.Every(0), checkpoint.WithRolling(), checkpoint.Gzip())
	_, _, err = s.Tick(ctx, 2, 2)
	require.NoError(t, err)
	require.Equal(t, []string{".checkpoint.lock", "step_last.json.gz"}, dirNames(t, dir))
	v, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.NoError(t, s.Close())
	s = openStore[int](t, dir, checkpoint.Every(0), checkpoint.WithRolling(), checkpoint.Zstd())
	_, _, err = s.Tick(ctx, 3, 3)
	require.NoError(t, err)
	require.Equal(t, []string{".checkpoint.lock", "step_last.json.zst"}, dirNames(t, dir))
	v, _, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

func TestSideFilesRoundTripAndAreNoCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	type result struct {
		Stories int      `json:"stories"`
		Done    []string `json:"done"`
	}
	require.NoError(t, s.WriteJSON(ctx, "result.json", result{Stories: 2, Done: []string{"a"}}))
	require.NoError(t, s.WriteJSON(ctx, "result.json", result{Stories: 2, Done: []string{"a", "b"}}))
	var got result
	require.NoError(t, s.ReadJSON(ctx, "result.json", &got))
	require.Equal(t, result{Stories: 2, Done: []string{"a", "b"}}, got)
	require.Equal(t, []string{".checkpoint.lock", "result.json"}, dirNames(t, dir))

	// Side files are not checkpoints.
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list)

	require.ErrorIs(t, s.ReadJSON(ctx, "missing.json", &got), checkpoint.ErrNotFound)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o644))
	require.ErrorIs(t, s.ReadJSON(ctx, "bad.json", &got), checkpoint.ErrCorrupt)
	require.ErrorIs(t, s.WriteJSON(ctx, "x.json", make(chan int)), checkpoint.ErrInvalid)

	r := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
	require.ErrorIs(t, r.WriteJSON(ctx, "result.json", 1), checkpoint.ErrReadOnly)
	require.NoError(t, r.ReadJSON(ctx, "result.json", &got))
}
