package checkpoint

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// openSessionsDirBackend opens the root of sessions dir through
// OpenSessionsBackend on the directory's Backend.
func openSessionsDirBackend(dir string, opts ...Option) (*Sessions, error) {
	b, err := openDirWith(dir, opts...)
	if err != nil {
		return nil, err
	}
	return OpenSessionsBackend(b, opts...)
}

// TestKill9DuringSessionsOnABackendLeavesNoHalfSession kills a process
// that creates and forks sessions through OpenSessionsBackend, and proves
// that every session it finished is there and whole, that no half-made
// session is ever listed, and that RemoveStaging then removes what the
// dead forks left.
func TestKill9DuringSessionsOnABackendLeavesNoHalfSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 11))
	ctx := context.Background()
	acked := map[string]bool{}
	kills := killtest.Kills(t, 15)
	for kill := 0; kill < kills; kill++ {
		// The child acknowledges each session it finished and says
		// "forking" before each fork: killing it after a line chosen at
		// random kills it now and then mid-fork.
		killSessionsChild(t, rng, 9, acked, dir, "backend")
		r, err := openSessionsDirBackend(dir)
		require.NoError(t, err)
		checkSessionsAfterKill(t, r, kill, acked)
		require.NoError(t, r.Close())
	}

	// What a killed fork left is out of sight; RemoveStaging removes it,
	// and leaves every listed session as it was.
	r, err := openSessionsDirBackend(dir)
	require.NoError(t, err)
	defer r.Close()
	before, err := r.List(ctx)
	require.NoError(t, err)
	removed, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	after, err := r.List(ctx)
	require.NoError(t, err)
	require.Equal(t, before, after)
	ids, err := r.b.Children(ctx)
	require.NoError(t, err)
	for _, id := range ids {
		sub, err := r.b.Sub(ctx, id, false)
		require.NoError(t, err)
		_, _, metaErr := readMetaIn(ctx, sub, id)
		if errors.Is(metaErr, ErrNotFound) { // not a session
			_, statErr := sub.Stat(ctx, sessionFile)
			c, claimErr := readClaim(ctx, sub)
			switch {
			case statErr == nil:
				require.Equal(t, []string{sessionFile}, objectNamesIn(t, sub), "%s: only its tombstone stays", id)
			case claimErr == nil:
				require.NotEqual(t, claimFork, c.Op, "%s: a dead fork's checkpoints are left after RemoveStaging", id)
			}
		}
		require.NoError(t, sub.Close())
	}
	t.Logf("%d kills, %d sessions finished, %d half-made forks removed", kills, len(acked), len(removed))
}

// objectNamesIn returns the names of the objects in b.
func objectNamesIn(t *testing.T, b Backend) []string {
	t.Helper()
	objs, err := b.List(context.Background())
	require.NoError(t, err)
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	return names
}
