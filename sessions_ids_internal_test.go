package checkpoint

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/names"
)

// TestCheckIDTellsACollisionFromACopy: under a mapped name, a
// session.json that records another ID of the same name (what a SHA-256
// collision would look like) is no session of the ID asked for
// (ErrNotFound), and one that records an ID of another name (a directory
// copied or renamed by hand) is damage (ErrCorrupt); an ID of earlier
// releases is its name, whatever its session.json records.
func TestCheckIDTellsACollisionFromACopy(t *testing.T) {
	t.Parallel()
	name := names.SessionName("a b")
	require.NoError(t, checkID("a b", "a b", name))
	require.NoError(t, checkID("a b", "", name), "listing takes the recorded ID")
	require.ErrorIs(t, checkID("a b", "c d", name), ErrNotFound, "a collision")
	require.ErrorIs(t, checkID("c d", "", name), ErrCorrupt, "a copy")
	require.ErrorIs(t, checkID("c d", "a b", name), ErrCorrupt, "a copy")
	require.ErrorIs(t, checkID("", "", name), ErrCorrupt, "no ID recorded")
	require.NoError(t, checkID("001", "005", "005"), "a session directory of earlier releases renamed by hand")
}
