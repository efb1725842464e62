package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// TestSessionsOnDirBackend runs the sessions of a Backend on the local
// directory, through the generic path (OpenSessionsBackend(OpenDir(...)))
// rather than OpenSessions.
func TestSessionsOnDirBackend(t *testing.T) {
	t.Parallel()
	runSessionsOnBackend(t, func(t *testing.T) checkpoint.Backend {
		b, err := checkpoint.OpenDir(t.TempDir(), checkpoint.NoSync())
		require.NoError(t, err)
		return b
	})
}
