package s3store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// TestSessionCreateRetriedAfterItLandedMakesOneSession: the PUT of a new
// session's session.json lands, its answer is lost, and the SDK sends it
// again: the retry's If-None-Match fails on the caller's own object. New
// must return that session (or an error, leaving none): not call it
// another worker's, go on to the next number and leave two sessions for
// one call.
func TestSessionCreateRetriedAfterItLandedMakesOneSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := &landThenLose{suffix: "/session.json", rt: http0()}
	lose.n.Store(1)
	b, err := New(f.clientThrough(lose), f.bucket, "root")
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(b)
	require.NoError(t, err)
	defer r.Close()
	s, err := r.New(ctx, map[string]string{"by": "one call"})
	require.Equal(t, int32(1), lose.lost.Load(), "no answer was lost")
	list, lerr := r.List(ctx)
	require.NoError(t, lerr)
	var ids []string
	for _, x := range list {
		ids = append(ids, x.ID)
	}
	if err != nil {
		require.Empty(t, ids, "New failed (%v) and left sessions", err)
		return
	}
	require.Equal(t, []string{s.ID}, ids, "one New made sessions %v", ids)
}

// TestForkRetriedAfterItLandedKeepsItsCheckpoints: the same lost answer
// for a fork's session.json: the fork must not remove its checkpoints
// from under the session.json it published, leaving a visible fork with
// none.
func TestForkRetriedAfterItLandedKeepsItsCheckpoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := &landThenLose{suffix: "/session.json", rt: http0()}
	b, err := New(f.clientThrough(lose), f.bucket, "root")
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(b)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(ctx, "a", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, "a")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 10)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	lose.n.Store(1)
	_, ferr := r.Fork(ctx, "a", 1, nil)
	require.Equal(t, int32(1), lose.lost.Load(), "no answer was lost")
	list, err := r.List(ctx)
	require.NoError(t, err)
	for _, s := range list {
		if s.ID != "a" {
			require.Equalf(t, 1, s.Checkpoints, "fork %s is listed with %d checkpoints (Fork returned %v)", s.ID, s.Checkpoints, ferr)
		}
	}
}

// TestSessionClaimRetriedAfterItLandedIsTheCallersOwn: the PUT of a
// fork's claim lands, its answer is lost, and the SDK sends it again: the
// retry's If-None-Match fails on the caller's own claim, which Fork must
// recognise by its token and go on with (the first free number), not take
// for another worker's and leave behind.
func TestSessionClaimRetriedAfterItLandedIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := &landThenLose{suffix: "/.session.claim", rt: http0()}
	b, err := New(f.clientThrough(lose), f.bucket, "root")
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(b)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(ctx, "a", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, "a")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 10)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	lose.n.Store(1)
	s, err := r.Fork(ctx, "a", 1, nil)
	require.Equal(t, int32(1), lose.lost.Load(), "no answer was lost")
	require.NoError(t, err)
	require.Equal(t, "001", s.ID, "the fork took its own claim for another worker's")
	children, err := b.Children(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a", "001"}, children, "a fork left a claim behind")
}
