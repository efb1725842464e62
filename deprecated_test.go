package checkpoint

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRenamedNamesKeepWorking: hosts written against the names before the
// renames compile and behave as before.
func TestRenamedNamesKeepWorking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, NoSync(), Every(2), KeepEvery(4))
	require.Equal(t, s.Location(), s.Dir())
	for step := int64(0); step <= 5; step++ {
		_, _, err := s.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	infos, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 4}, steps(infos), "Every(2) saves the even steps; KeepEvery(4) then removes step 2, as KeepMultiplesOf(4) does")
	for _, info := range infos {
		require.Equal(t, info.Location, info.Path)
		v, got, err := s.LoadInfo(ctx, info)
		require.NoError(t, err)
		require.Equal(t, int(info.Step), v)
		require.Equal(t, info, got)
	}

	r, err := OpenSessions(t.TempDir(), NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, r.Location(), r.Dir())
	sess, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := OpenSession[int](r, sess.ID)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	st, resumed, err := ResumeSession[int](ctx, r)
	require.NoError(t, err)
	require.Equal(t, sess.ID, resumed.ID)
	require.NoError(t, st.Close())
}
