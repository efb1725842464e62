package dirstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
)

// lockRole opens a writer on the directory Args[0] in a process of its
// own and prints what happened: "opened", "locked" or the error.
var lockRole = killtest.Register("lock", func(c *killtest.Child) int {
	s, err := checkpoint.Open[int](c.Args[0], checkpoint.NoSync())
	switch {
	case err == nil:
		c.Printf("opened")
		s.Close()
	case errors.Is(err, checkpoint.ErrLocked):
		c.Printf("locked")
	default:
		c.Printf("error: %v", err)
	}
	return 0
})

// openInChild runs lockRole on dir in another process and returns what it
// printed.
func openInChild(t *testing.T, dir string) string {
	t.Helper()
	p := lockRole.Start(t, dir)
	require.NoError(t, p.Wait())
	return strings.Join(p.Output(), "\n")
}

// TestRemovedOrReplacedLockFileLetsNoSecondWriterIn removes, or replaces,
// the lock file of a directory that a writer holds, and proves that a
// writer in another process is still refused: two writers would prune each
// other's checkpoints. Once the first writer closes, the other gets in.
func TestRemovedOrReplacedLockFileLetsNoSecondWriterIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		swap func(path string) error
	}{
		{"removed", os.Remove},
		{"replaced", func(path string) error {
			if err := os.WriteFile(path+".new", nil, 0o644); err != nil {
				return err
			}
			return os.Rename(path+".new", path)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.name == "replaced" {
				platformtest.SkipUnderWine(t, "Wine refuses to rename over a file another handle holds open (it has no POSIX rename), so the lock file cannot be replaced under its writer there")
			}
			dir := t.TempDir()
			w := openStore[int](t, dir, checkpoint.NoSync())
			require.NoError(t, c.swap(filepath.Join(dir, lockName)))
			require.Equal(t, "locked", openInChild(t, dir), "a second writer got in")
			_, err := checkpoint.Open[int](dir, checkpoint.NoSync())
			require.ErrorIs(t, err, checkpoint.ErrLocked, "nor in this process")

			_, err = w.Save(ctx, 1, 1)
			require.NoError(t, err, "the first writer goes on")
			require.NoError(t, w.Close())
			require.Equal(t, "opened", openInChild(t, dir))
		})
	}
}

// TestSymlinkedLockFileIsRefused: a symbolic link at the lock file's name
// leads to a file that is not the one at the name, and could be pointed
// elsewhere under a writer; Open says so instead of locking its target.
func TestSymlinkedLockFileIsRefused(t *testing.T) {
	t.Parallel()
	platformtest.RequireSymlinks(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "target"), nil, 0o644))
	require.NoError(t, os.Symlink("target", filepath.Join(dir, lockName)))
	_, err := checkpoint.Open[int](dir, checkpoint.NoSync())
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, lockName+" is a symbolic link")
}

// TestLockFileThatIsADirectoryIsRefused: a directory at the lock file's
// name (made by hand) is an error wrapping ErrInvalid that names it, and
// the directory is left as it is.
func TestLockFileThatIsADirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, lockName, "x"), 0o755))
	_, err := checkpoint.Open[int](dir, checkpoint.NoSync())
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, lockName+" is not a regular file")
	require.DirExists(t, filepath.Join(dir, lockName, "x"))
}

// TestLegacySessionsLockDoesNotBlock: the lock file of the legacy
// directory protocol (.sessions.lock), even held by another process, keeps
// no call waiting (a root of sessions takes no lock of its own) and goes
// with the next New; a done context stops New before it makes anything.
func TestLegacySessionsLockDoesNotBlock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := openSessions(t, dir)
	held, err := dirstore.LockFile(dir, sessionsLockName) // a process of the legacy protocol
	require.NoError(t, err)
	released := false
	defer func() {
		if !released {
			dirstore.UnlockFile(held)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = r.New(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, listIDs(t, r))
	s, err := r.New(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, "001", s.ID)
	// Wine's delete keeps a removed name until its last handle closes
	// (see .ci/wine-test): the holder lets go before the name is looked
	// for. A New that had not removed the file would leave it there.
	released = true
	require.NoError(t, dirstore.UnlockFile(held))
	require.NoFileExists(t, filepath.Join(dir, sessionsLockName))
}
