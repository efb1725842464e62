package checkpoint_test

import (
	"context"
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

// TestDirectoryRootReadsTheSameEitherWay opens one directory as a root of
// sessions both ways: each sees, opens and numbers past the other's
// sessions.
func TestDirectoryRootReadsTheSameEitherWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	opts := []checkpoint.Option{checkpoint.NoSync(), checkpoint.WithLayout("turn", 3)}
	local, err := checkpoint.OpenSessions(dir, opts...)
	require.NoError(t, err)
	defer local.Close()
	b, err := checkpoint.OpenDir(dir, opts...)
	require.NoError(t, err)
	generic, err := checkpoint.OpenSessionsBackend(b, opts...)
	require.NoError(t, err)
	defer generic.Close()

	s, err := local.New(ctx, map[string]string{"by": "local"})
	require.NoError(t, err)
	playSession(t, local, s.ID, 2)
	_, err = local.Fork(ctx, s.ID, 1, nil)
	require.NoError(t, err)
	g, err := generic.New(ctx, map[string]string{"by": "generic"})
	require.NoError(t, err)
	require.Equal(t, "003", g.ID, "numbering goes on past the other's sessions")
	playSession(t, generic, g.ID, 1)
	_, err = generic.Fork(ctx, s.ID, 2, nil)
	require.NoError(t, err)

	a, err := local.List(ctx)
	require.NoError(t, err)
	bl, err := generic.List(ctx)
	require.NoError(t, err)
	require.Equal(t, a, bl)
	require.Equal(t, []string{"001", "002", "003", "004"}, listedIDs(t, local))
	for _, s := range a {
		require.NoError(t, s.Err)
	}
}
