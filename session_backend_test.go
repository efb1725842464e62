package checkpoint_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// TestSessionsOnDirBackend runs the sessions of a Backend on the local
// directory, through the generic path (OpenSessionsBackend(OpenDir(...)))
// rather than OpenSessions.
func TestSessionsOnDirBackend(t *testing.T) {
	t.Parallel()
	backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
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

// playSession saves steps 1 to last of the session id.
func playSession(t *testing.T, r *checkpoint.Sessions, id string, last int64) {
	t.Helper()
	st, err := checkpoint.OpenSession[int](r, id)
	require.NoError(t, err)
	for step := int64(1); step <= last; step++ {
		_, err := st.Save(context.Background(), step, int(step)*10)
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
}

// listedIDs returns the IDs r lists, sorted, each of a session that reads.
func listedIDs(t *testing.T, r *checkpoint.Sessions) []string {
	t.Helper()
	list, err := r.List(context.Background())
	require.NoError(t, err)
	var ids []string
	for _, s := range list {
		require.NoError(t, s.Err, s.ID)
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}
