package checkpoint_test

import (
	"runtime"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// The local directory keeps the contract of checkpoint.Backend.
func TestDirBackendConforms(t *testing.T) {
	var opts []backendtest.Option
	if checkpoint.UnderWine() {
		// Wine 8 has no POSIX rename (FileRenameInformationEx): as on a
		// FAT volume, a file that is open cannot be renamed over.
		opts = append(opts, backendtest.ReplaceWaitsForReaders())
	}
	if runtime.GOOS != "windows" {
		// Windows' Lstat tells no inode change time: a rewrite in place
		// that restores the modification time keeps the Version there
		// (see the README's platform notes).
		opts = append(opts, backendtest.RewriteInPlace(rewriteFileInPlace))
	}
	backendtest.Run(t, func(t *testing.T) backendtest.Opener {
		dir := t.TempDir()
		return func() (checkpoint.Backend, error) { return checkpoint.OpenDir(dir, checkpoint.NoSync()) }
	}, opts...)
}

// rewriteFileInPlace writes p over the file of name without a new inode
// and restores its modification time, as cp -p over it would, touching it
// until its inode change time moves (see checkpoint.RewriteInPlace).
func rewriteFileInPlace(t *testing.T, b checkpoint.Backend, name string, p []byte) {
	t.Helper()
	checkpoint.RewriteInPlace(t, b.Locate(name), p)
}
