package checkpoint_test

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

// TestSessionsOnDirBackend runs the sessions of a Backend on the local
// directory, through the generic path (OpenSessionsBackend(dirstore.Open(...)))
// rather than OpenSessions.
func TestSessionsOnDirBackend(t *testing.T) {
	t.Parallel()
	backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
		b, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
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
	b, err := dirstore.Open(dir, dirstore.NoSync())
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

// TestDirectoryRootListsNoClaimOrTombstoneOfTheBackendPath: on a directory
// opened both ways, what the backend path leaves where there is no session
// (a crashed fork's claim, RemoveStaging's tombstone) was listed by
// OpenSessions as a damaged session.
func TestDirectoryRootListsNoClaimOrTombstoneOfTheBackendPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	generic, err := checkpoint.OpenSessionsBackend(b, checkpoint.NoSync())
	require.NoError(t, err)
	defer generic.Close()
	write := func(data string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, data); return err }
	}
	// A fork that crashed after its claim and a first copy (session 7),
	// and a creation that crashed after its claim (session 8).
	for _, id := range []string{"7", "8"} {
		sub, err := b.Sub(ctx, id, true)
		require.NoError(t, err)
		defer sub.Close()
		op := map[string]string{"7": "fork", "8": "create"}[id]
		_, err = sub.Create(ctx, ".session.claim", write(`{"op":"`+op+`","token":"x"}`))
		require.NoError(t, err)
		if id == "7" {
			_, err = sub.Create(ctx, "step_00000001.json", write(`{}`))
			require.NoError(t, err)
		}
	}
	local, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer local.Close()
	require.Empty(t, listedIDs(t, local), "a claim without session.json is no session")
	_, err = generic.RemoveStaging(ctx) // leaves a tombstone in 7
	require.NoError(t, err)
	require.Empty(t, listedIDs(t, local), "a tombstone is no session")
	require.Empty(t, listedIDs(t, generic))
}

// TestRemoveStagingTakesNoClaimBesideASessionForAFork: a fork's claim that
// a crash left beside the session.json it published (the crash came
// between the two) is removed by RemoveStaging, so that the session, once
// its session.json is lost, is listed as damaged and keeps its
// checkpoints, instead of being taken for a fork a crash interrupted.
func TestRemoveStagingTakesNoClaimBesideASessionForAFork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemNoSync())
	b, err := m.Open()
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(b)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(ctx, "a", nil)
	require.NoError(t, err)
	playSession(t, r, "a", 2)
	raw, err := m.Open()
	require.NoError(t, err)
	defer raw.Close()
	sub, err := raw.Sub(ctx, "a", false)
	require.NoError(t, err)
	defer sub.Close()
	_, err = sub.Create(ctx, ".session.claim", func(w io.Writer) error {
		_, err := io.WriteString(w, `{"op":"fork","token":"x"}`)
		return err
	})
	require.NoError(t, err)

	removed, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Empty(t, removed, "a live session is no fork's leftover")
	_, err = sub.Remove(ctx, "session.json") // lost, by hand
	require.NoError(t, err)
	removed, err = r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
	require.Len(t, checkpointsIn(t, sub), 2, "RemoveStaging deleted the checkpoints of a session")
	s, err := r.Get(ctx, "a")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt, "a session without its session.json is listed as damaged")
	require.Equal(t, 2, s.Checkpoints)
}

// TestCreateTakesOverACrashedCreationsClaim: a Create of an ID whose
// creation a crash interrupted after its claim takes the claim over and
// makes the session, leaving only its session.json; a fork's claim is
// never taken over.
func TestCreateTakesOverACrashedCreationsClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemNoSync())
	raw, err := m.Open()
	require.NoError(t, err)
	defer raw.Close()
	for id, op := range map[string]string{"run": "create", "forked": "fork"} {
		sub, err := raw.Sub(ctx, id, true)
		require.NoError(t, err)
		_, err = sub.Create(ctx, ".session.claim", func(w io.Writer) error {
			_, err := io.WriteString(w, `{"op":"`+op+`","token":"x"}`)
			return err
		})
		require.NoError(t, err)
		require.NoError(t, sub.Close())
	}
	b, err := m.Open()
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(b)
	require.NoError(t, err)
	defer r.Close()
	s, err := r.Create(ctx, "run", nil)
	require.NoError(t, err)
	require.Equal(t, "run", s.ID)
	sub, err := raw.Sub(ctx, "run", false)
	require.NoError(t, err)
	defer sub.Close()
	objs, err := sub.List(ctx)
	require.NoError(t, err)
	require.Len(t, objs, 1, "only session.json stays")
	require.Equal(t, "session.json", objs[0].Name)
	_, err = r.Create(ctx, "forked", nil)
	require.ErrorIs(t, err, checkpoint.ErrExists)
}
