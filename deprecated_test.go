package checkpoint_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/storage"
	"github.com/stretchr/testify/require"
)

// TestRenamedNamesKeepWorking: the deprecated names (Every, KeepEvery,
// Dir, Path, LoadInfo, OpenSession, ResumeSession) behave as the names
// that replace them.
func TestRenamedNamesKeepWorking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync(), checkpoint.Every(2), checkpoint.KeepEvery(4))
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

	r, err := checkpoint.OpenSessions(t.TempDir(), checkpoint.NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, r.Location(), r.Dir())
	sess, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSession[int](r, sess.ID)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	st, resumed, err := checkpoint.ResumeSession[int](ctx, r)
	require.NoError(t, err)
	require.Equal(t, sess.ID, resumed.ID)
	require.NoError(t, st.Close())
}

// TestOpenDirIsTheDirectoryOfOpen: the deprecated OpenDir opens what
// dirstore.Open opens, with the ReadOnly and NoSync among the store's
// options, its errors the store's (an *Error of "open" on the directory),
// and a store on it behaves as Open's.
func TestOpenDirIsTheDirectoryOfOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "runs")
	_, err := checkpoint.OpenDir(missing, checkpoint.ReadOnly(), checkpoint.KeepLast(2))
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	var e *checkpoint.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "open", e.Op)
	require.Equal(t, missing, e.Path)
	require.NoDirExists(t, missing)
	_, err = checkpoint.OpenDir(missing, checkpoint.WithLayout("a/b", 3))
	require.ErrorIs(t, err, checkpoint.ErrInvalid, "the store's options are checked")

	b, err := checkpoint.OpenDir(missing, checkpoint.NoSync())
	require.NoError(t, err)
	require.True(t, storage.TraitsOf(b).Local)
	s, err := checkpoint.OpenBackend[int](b, checkpoint.NoSync())
	require.NoError(t, err)
	_, err = s.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	got, _, err := openStore[int](t, missing, checkpoint.ReadOnly()).Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, got)
}
