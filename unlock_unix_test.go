//go:build unix

package checkpoint

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCloseReleasesTheLockThatAForkedChildShares: a process forked by
// another goroutine (exec.Command) holds a copy of every descriptor until it
// execs, the lock file's too. Close must release the lock all the same, so
// that a store reopened right after Close is not ErrLocked.
func TestCloseReleasesTheLockThatAForkedChildShares(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open[int](dir, NoSync())
	require.NoError(t, err)
	// The child's copy, as fork makes it: the same open file.
	child, err := syscall.Dup(int(s.lock.Fd()))
	require.NoError(t, err)
	defer syscall.Close(child)
	require.NoError(t, s.Close())

	s, err = Open[int](dir, NoSync())
	require.NoError(t, err, "the lock outlived Close")
	require.NoError(t, s.Close())
}
