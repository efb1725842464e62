package checkpoint_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// TestOpenOnAFIFOFailsWithoutHanging: Open on a path that is a FIFO fails,
// never hangs. (OpenSessions on one:
// TestOpenSessionsOnAFIFOFailsWithoutHanging.)
func TestOpenOnAFIFOFailsWithoutHanging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "store"))
	done := make(chan error, 1)
	go func() { _, err := checkpoint.Open[int](filepath.Join(dir, "store")); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Open on a FIFO hangs")
	}
}
