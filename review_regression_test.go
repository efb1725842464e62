package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRollingSaveAfterTheStoreRemovedItsRollingFile: the rolling file is
// replaced on the condition that it is still what the store last wrote; a
// Delete or Truncate that removed it made that condition "an object that
// is gone", and the next Tick failed with ErrConflict although nobody
// else had touched the directory.
func TestRollingSaveAfterTheStoreRemovedItsRollingFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, remove := range []string{"truncate", "delete"} {
		t.Run(remove, func(t *testing.T) {
			s := openStore[int](t, t.TempDir(), WithRolling(), Every(10))
			_, _, err := s.Tick(ctx, 0, 0) // a numbered checkpoint
			require.NoError(t, err)
			_, _, err = s.Tick(ctx, 3, 3) // the rolling file
			require.NoError(t, err)
			if remove == "truncate" {
				removed, err := s.Truncate(ctx, 0)
				require.NoError(t, err)
				require.Len(t, removed, 1)
			} else {
				require.NoError(t, s.Delete(ctx, 3))
			}
			_, _, err = s.Tick(ctx, 1, 1)
			require.NoError(t, err, "the first rolling save after the store removed its rolling file")
			_, _, err = s.Tick(ctx, 2, 2)
			require.NoError(t, err)
			_, info, err := s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2), info.Step)
		})
	}
}

// TestLatestNamesTheOtherLayoutBesideADirectoryOfThatLayout: a store
// opened with the wrong layout on a directory of another layout's
// checkpoints is ErrInvalid naming that layout, never a fresh start. A
// directory named like the greatest checkpoint of that layout made it a
// fresh start: the directory's listing says no types, and the directory
// was taken as the sample whose header proves the layout.
func TestLatestNamesTheOtherLayoutBesideADirectoryOfThatLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, WithLayout("turn", 3))
	for step := int64(1); step <= 3; step++ {
		_, err := w.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, os.Mkdir(filepath.Join(dir, "turn_999.json"), 0o755))
	s := openStore[int](t, dir, ReadOnly())
	_, _, err := s.Latest(ctx)
	require.ErrorIs(t, err, ErrInvalid)
	require.NotErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, `WithLayout("turn", 3)`)
}
