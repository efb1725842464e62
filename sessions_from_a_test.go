package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

func TestRemoveStagingRemovesStagingDirectoriesAndTheOldLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessionsRoot(t, dir)
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	staging := filepath.Join(dir, checkpoint.StagingPrefix+"ABC")
	require.NoError(t, os.MkdirAll(staging, 0o755))
	touch(t, staging, "step_00000001.json")

	ro := openSessionsRoot(t, dir, checkpoint.ReadOnly())
	_, err = ro.RemoveStaging(ctx)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)

	// The lock file of the directory protocol of Sessions goes with its
	// staging directories: Sessions takes no lock on the root.
	touch(t, dir, checkpoint.SessionsLockName)

	removed, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{staging}, removed)
	require.NoDirExists(t, staging)
	require.NoFileExists(t, filepath.Join(dir, checkpoint.SessionsLockName))
	require.DirExists(t, s.Dir, "sessions are not staging")

	removed, err = r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
}
