package checkpoint

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A clock that ticks coarsely (Windows' ticks every 0.5 to 15.6 ms) gives
// two stores opened one after the other the same time, and the first
// stamps its saves 1 ns apart within it. The redo of a failed step saved
// by the second store is still stamped after the error checkpoint: Load
// returns it, and it supersedes the error checkpoint as a later redo does.
func TestRedoSavedInTheTickOfItsErrorCheckpointIsWhatLoadReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := withClock(func() time.Time { return tick })
	s := openStore[int](t, dir, NoSync(), clock)
	_, err := s.Save(ctx, 1, 10)
	require.NoError(t, err)
	_, err = s.SaveError(ctx, 2, 20, errInjected)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openStore[int](t, dir, NoSync(), clock)
	_, err = s.Save(ctx, 2, 21)
	require.NoError(t, err)
	v, info, err := s.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, KindStep, info.Kind)
	require.Equal(t, 21, v)
	v, info, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, KindStep, info.Kind)
	require.Equal(t, 21, v)
	require.NoError(t, s.Close())
	s = openStore[int](t, dir, NoSync(), clock)
	infos, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, steps(infos))
	require.Equal(t, KindStep, infos[1].Kind, "the redo superseded the error checkpoint")
}

// On a coarse clock a SetMeta in the tick of another session's last save
// still makes its session the most recently active.
func TestSetMetaInTheTickOfAnotherSessionsSaveMakesItTheMostRecentlyActive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := withClock(func() time.Time { return tick })
	r := openSessions(t, dir, NoSync(), clock)
	for range 2 {
		_, err := r.New(ctx, nil)
		require.NoError(t, err)
	}
	st, err := OpenSessionStore[int](r, "001")
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := st.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())

	other := openSessions(t, dir, NoSync(), clock)
	ids := listIDs(t, other)
	require.Len(t, ids, 2)
	behind := ids[1]
	require.NoError(t, other.SetMeta(ctx, behind, map[string]string{"players": "4"}))
	st, got, err := ResumeLatestSession[int](ctx, r)
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
	r := openSessions(t, t.TempDir(), NoSync(), withClock(func() time.Time { return tick }))
	for range 3 {
		_, err := r.New(ctx, nil)
		require.NoError(t, err)
	}
	_, err := r.List(ctx) // reads the three sessions' times
	require.NoError(t, err)
	st, err := OpenSessionStore[int](r, "001")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Equal(t, "001", listIDs(t, r)[0])
}
