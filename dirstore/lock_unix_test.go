//go:build unix

package dirstore_test

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

// TestCloseReleasesTheLockThatAForkedChildShares: a process forked by
// another goroutine (exec.Command) holds a copy of every descriptor until it
// execs, the lock file's too. Close must release the lock all the same, so
// that a store reopened right after Close is not ErrLocked.
func TestCloseReleasesTheLockThatAForkedChildShares(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	s, err := checkpoint.OpenBackend[int](b, checkpoint.NoSync())
	require.NoError(t, err)
	// The child's copies, as fork makes them: the same open files.
	held := dirstore.HeldLock(b)
	require.NotEmpty(t, held)
	for _, f := range held {
		child, err := syscall.Dup(int(f.Fd()))
		require.NoError(t, err)
		defer syscall.Close(child)
	}
	require.NoError(t, s.Close())

	s, err = checkpoint.Open[int](dir, checkpoint.NoSync())
	require.NoError(t, err, "the lock outlived Close")
	require.NoError(t, s.Close())
}
