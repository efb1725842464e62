package checkpoint_test

import (
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
	backendtest.Run(t, func(t *testing.T) backendtest.Opener {
		dir := t.TempDir()
		return func() (checkpoint.Backend, error) { return checkpoint.OpenDir(dir, checkpoint.NoSync()) }
	}, opts...)
}
