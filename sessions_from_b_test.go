package checkpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// On a coarse clock a SetMeta in the tick of another session's last save
// still makes its session the most recently active.
func TestSetMetaInTheTickOfAnotherSessionsSaveMakesItTheMostRecentlyActive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := checkpoint.WithClock(func() time.Time { return tick })
	r := openSessionRoot(t, dir, checkpoint.NoSync(), clock)
	for range 2 {
		_, err := r.New(ctx, nil)
		require.NoError(t, err)
	}
	st, err := checkpoint.OpenSessionStore[int](r, "001")
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := st.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())

	other := openSessionRoot(t, dir, checkpoint.NoSync(), clock)
	ids := listedSessionIDs(t, other)
	require.Len(t, ids, 2)
	behind := ids[1]
	require.NoError(t, other.SetMeta(ctx, behind, map[string]string{"players": "4"}))
	st, got, err := checkpoint.ResumeLatestSession[int](ctx, r)
	require.NoError(t, err)
	require.Equal(t, behind, got.ID, "SetMeta made %s the most recently active", behind)
	require.NoError(t, st.Close())
}

// On a coarse clock the session played last is the most recently active,
// though sessions were created in the same tick after its store's first
// save would be stamped.
func TestSessionPlayedInTheTickOfNewerSessionsIsTheMostRecentlyActive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := openSessionRoot(t, t.TempDir(), checkpoint.NoSync(), checkpoint.WithClock(func() time.Time { return tick }))
	for range 3 {
		_, err := r.New(ctx, nil)
		require.NoError(t, err)
	}
	_, err := r.List(ctx) // reads the three sessions' times
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, "001")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Equal(t, "001", listedSessionIDs(t, r)[0])
}

// openSessionRoot opens a root of sessions with opts and closes it when t
// ends.
func openSessionRoot(t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Sessions {
	t.Helper()
	r, err := checkpoint.OpenSessions(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// listedSessionIDs returns the IDs of r's sessions, most recently active
// first.
func listedSessionIDs(t *testing.T, r *checkpoint.Sessions) []string {
	t.Helper()
	list, err := r.List(context.Background())
	require.NoError(t, err)
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}
