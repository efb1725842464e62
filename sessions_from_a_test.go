package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRemoveStaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	staging := filepath.Join(dir, stagingPrefix+"ABC")
	require.NoError(t, os.MkdirAll(staging, 0o755))
	touch(t, staging, "step_00000001.json")

	ro := openSessions(t, dir, ReadOnly())
	_, err = ro.RemoveStaging(ctx)
	require.ErrorIs(t, err, ErrReadOnly)

	// The lock file of an earlier release's protocol goes with its
	// staging directories: this release takes no lock on the root.
	touch(t, dir, sessionsLockName)

	removed, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{staging}, removed)
	require.NoDirExists(t, staging)
	require.NoFileExists(t, filepath.Join(dir, sessionsLockName))
	require.DirExists(t, s.Dir, "sessions are not staging")

	removed, err = r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
}
