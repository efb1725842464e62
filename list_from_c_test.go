package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
	"github.com/stretchr/testify/require"
)

// A checkpoint rewritten in place with its size and modification time kept
// (as cp -p or rsync -t do) is read anew: the header cache does not serve
// the old file's header.
func TestHeaderCacheSeesARewriteThatKeepsSizeAndModTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	info, err := s.Save(ctx, 1, 1, checkpoint.WithMeta("by", "a"))
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", list[0].Meta["by"])
	was, err := os.Stat(info.Path)
	require.NoError(t, err)

	// Rewrite the file in place with another checkpoint of the same size,
	// then put its modification time back (as cp -p or rsync -t do).
	other := envelopeBytes(format.Header{Format: format.Version, Step: 1, Kind: checkpoint.KindStep, Time: info.Time, Meta: map[string]string{"by": "b"}}, []byte("1"))
	require.Len(t, other, int(was.Size()))
	require.NoError(t, os.WriteFile(info.Path, other, 0o644))
	for {
		// The change time has the clock's coarse granularity: touch
		// the file until it differs, as any later rewrite would.
		require.NoError(t, os.Chtimes(info.Path, was.ModTime(), was.ModTime()))
		now, err := os.Stat(info.Path)
		require.NoError(t, err)
		require.True(t, os.SameFile(was, now) && now.Size() == was.Size() && now.ModTime().Equal(was.ModTime()))
		if platformtest.ChangeTime(now) != platformtest.ChangeTime(was) || platformtest.ChangeTime(now) == 0 {
			break
		}
	}
	if platformtest.ChangeTime(was) == 0 {
		t.Skip("this system gives no inode change time")
	}
	list, err = s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", list[0].Meta["by"], "the cached header of the old file is not served")
}

// TestTransientHeaderErrorIsNotCached: a header a List could not read for
// a while (a permission taken away, then given back) is read again by the
// next call, never remembered as damage. It needs file permissions to
// bite, so as root it runs itself again as the user nobody.
func TestTransientHeaderErrorIsNotCached(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, "file modes do not restrict access (Chmod sets only the read-only attribute)")
	if os.Geteuid() == 0 {
		platformtest.RerunAsNobody(t)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, checkpoint.Every(5), checkpoint.WithRolling())
	for step := int64(0); step <= 7; step++ {
		_, _, err := w.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	r := openStore[int](t, dir, checkpoint.ReadOnly())
	rolling := filepath.Join(dir, "step_last.json")
	require.NoError(t, os.Chmod(rolling, 0))
	_, err := r.List(ctx)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(rolling, 0o644)) // the trouble has passed
	v, _, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, v)
	v, _, err = r.Load(ctx, 7)
	require.NoError(t, err)
	require.Equal(t, 7, v)
}
