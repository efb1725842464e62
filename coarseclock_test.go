package checkpoint

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A clock that ticks coarsely (Windows' ticks every 0.5 to 15.6 ms) gives
// two stores opened one after the other the same time. The redo of a
// failed step saved by the second store is still what Load returns, and
// the error checkpoint is kept (a tie proves nothing was saved after it).
func TestRedoSavedInTheTickOfItsErrorCheckpointIsWhatLoadReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := withClock(func() time.Time { return tick })
	s := openStore[int](t, dir, NoSync(), clock)
	_, err := s.SaveError(ctx, 2, 20, errInjected)
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
	require.Len(t, infos, 2, "the error checkpoint stays: its tie with the redo proves nothing")
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
