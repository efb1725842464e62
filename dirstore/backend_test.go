package dirstore_test

import (
	"runtime"
	"testing"

	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
	"github.com/gocheckpoint/checkpoint/storage"
)

// The local directory keeps the contract of storage.Backend.
func TestDirBackendConforms(t *testing.T) {
	var opts []backendtest.Option
	if platformtest.UnderWine() {
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
		return func() (storage.Backend, error) { return dirstore.Open(dir, dirstore.NoSync()) }
	}, opts...)
}

// rewriteFileInPlace writes p over the file of name without a new inode
// and restores its modification time, as cp -p over it would, touching it
// until its inode change time moves (see platformtest.RewriteInPlace).
func rewriteFileInPlace(t *testing.T, b storage.Backend, name string, p []byte) {
	t.Helper()
	platformtest.RewriteInPlace(t, b.Locate(name), p)
}
