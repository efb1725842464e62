package checkpoint

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func steps(infos []Info) []int64 {
	var out []int64
	for _, i := range infos {
		out = append(out, i.Step)
	}
	return out
}

func TestKeepLastPrunesAfterSave(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("beat", 3), KeepLast(3), Gzip())
	for step := int64(1); step <= 10; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	_, err := s.SaveFinal(ctx, 2, 2)
	require.NoError(t, err)
	_, err = s.SaveError(ctx, 1, 1, errors.New("x"))
	require.NoError(t, err)
	_, err = s.Save(ctx, 11, 11)
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 9, 10, 11}, steps(list), "final and error checkpoints are kept")
	require.Equal(t, []Kind{KindError, KindFinal, KindStep, KindStep, KindStep}, []Kind{list[0].Kind, list[1].Kind, list[2].Kind, list[3].Kind, list[4].Kind})
}

func TestPruneNeverRemovesNewestLoadable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("beat", 3))
	for step := int64(1); step <= 5; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	// The two newest are damaged, but their headers still read, so they
	// count toward KeepLast(2); step 3 is the newest that loads.
	for _, name := range []string{"beat_004.json", "beat_005.json"} {
		b, err := os.ReadFile(dir + "/" + name)
		require.NoError(t, err)
		b[len(b)-5] ^= 1
		require.NoError(t, os.WriteFile(dir+"/"+name, b, 0o644))
	}
	s = openStore[int](t, dir, WithLayout("beat", 3), KeepLast(2))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, steps(removed))
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.Equal(t, int64(3), info.Step)
}

func TestPruneWithoutRuleRemovesNothing(t *testing.T) {
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	for step := int64(1); step <= 5; step++ {
		_, err := s.Save(ctx, step, 1)
		require.NoError(t, err)
	}
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 5)
}

func TestPruneSkipsUnreadableHeaders(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("beat", 3))
	for step := int64(1); step <= 4; step++ {
		_, err := s.Save(ctx, step, 1)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(dir+"/beat_001.json", []byte("garbage"), 0o644))
	s = openStore[int](t, dir, WithLayout("beat", 3), KeepLast(1))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, steps(removed), "a file that does not parse is neither counted nor removed")
	require.FileExists(t, dir+"/beat_001.json")
}
