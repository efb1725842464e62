package checkpoint_test

import (
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// The local directory keeps the contract of checkpoint.Backend.
func TestDirBackendConforms(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Opener {
		dir := t.TempDir()
		return func() (checkpoint.Backend, error) { return checkpoint.OpenDir(dir, checkpoint.NoSync()) }
	})
}
