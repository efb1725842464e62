package checkpoint_test

import (
	"context"
	"testing"

	"github.com/gocheckpoint/checkpoint"

	"github.com/stretchr/testify/require"
)

// A save of a negative step is ErrInvalid, saying steps are 0 or more,
// and names no file a step of -1 would have.
func TestSaveOfNegativeStepNamesNoImpossibleFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	_, err := s.Save(context.Background(), -1, 1)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.Equal(t, "checkpoint: save step -1 "+dir+": invalid argument: negative step -1: steps are 0 or more", err.Error())
	require.NotContains(t, err.Error(), "-1.json")
}

// TestRollingSaveWorksAfterTheStoreRemovedItsRollingFile: the rolling file
// is replaced on the condition that it is still what the store last wrote;
// after the store's own Delete or Truncate removed it, the condition is that
// nothing is there, and the next Tick saves.
func TestRollingSaveWorksAfterTheStoreRemovedItsRollingFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, remove := range []string{"truncate", "delete"} {
		t.Run(remove, func(t *testing.T) {
			s := openStore[int](t, t.TempDir(), checkpoint.WithRolling(), checkpoint.Every(10))
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
