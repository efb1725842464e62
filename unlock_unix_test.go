//go:build unix

package checkpoint

import (
	"os"
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
	// The child's copies, as fork makes them: the same open files.
	lock := s.b.(*dirBackend).lock
	held := []*os.File{lock.file}
	if lock.dir != nil {
		held = append(held, lock.dir)
	}
	for _, f := range held {
		child, err := syscall.Dup(int(f.Fd()))
		require.NoError(t, err)
		defer syscall.Close(child)
	}
	require.NoError(t, s.Close())

	s, err = Open[int](dir, NoSync())
	require.NoError(t, err, "the lock outlived Close")
	require.NoError(t, s.Close())
}
