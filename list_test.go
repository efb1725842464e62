package checkpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
	"github.com/stretchr/testify/require"
)

func TestListIgnoresTempAndForeignFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	for _, step := range []int64{2, 1, 10} {
		_, err := s.Save(ctx, step, int(step), checkpoint.WithMeta("n", fmt.Sprint(step)))
		require.NoError(t, err)
	}
	for _, name := range []string{
		".turn_004.json123456", // a temp file
		"turn_4.json",          // not this layout's padding
		"turn_-05.json",        // not a step
		"turn_005.json.bak",    // not a checkpoint extension
		"step_00000005.json",   // another layout
		"notes.txt",
		"turn_006.weird.json",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "turn_007.json"), 0o755)) // a directory is not a checkpoint

	list, err := s.List(ctx)
	require.NoError(t, err)
	var steps []int64
	for _, info := range list {
		steps = append(steps, info.Step)
		require.Equal(t, map[string]string{"n": fmt.Sprint(info.Step)}, info.Meta)
		require.Equal(t, checkpoint.KindStep, info.Kind)
		require.False(t, info.Time.IsZero())
		require.Positive(t, info.Size)
	}
	require.Equal(t, []int64{1, 2, 10}, steps)
}

func TestListReadsHeadersNotStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[string](t, dir, checkpoint.WithLayout("turn", 3))
	big := strings.Repeat("x", 3<<20)
	info, err := s.Save(ctx, 1, big, checkpoint.WithMeta("k", "v"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// Damage the state only: the header stays readable, so a fresh reader's
	// List still describes the file (it never reads the state), while Load
	// notices the damage.
	f, err := os.OpenFile(info.Path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("y"), 2<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := openStore[string](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, map[string]string{"k": "v"}, list[0].Meta)
	require.Equal(t, info.Time, list[0].Time)
	_, _, err = r.Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
}

func TestListReportsUnreadableHeaderOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json"), []byte("junk"), 0o644))
	var logs bytes.Buffer
	s := openStore[int](t, dir, checkpoint.ReadOnly(), checkpoint.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	for i := 0; i < 3; i++ {
		list, err := s.List(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Zero(t, list[0].Format, "an unreadable header is listed with format 0")
	}
	require.Equal(t, 1, strings.Count(logs.String(), "unreadable checkpoint header"))
}

func TestReaderCacheFollowsTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, checkpoint.KeepLast(2))
	r := openStore[int](t, dir, checkpoint.ReadOnly())
	for step := int64(0); step < 200; step++ {
		_, err := w.Save(ctx, step, 1)
		require.NoError(t, err)
		_, err = r.List(ctx)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, checkpoint.CachedHeaders(r), 3)
}

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
	w := openStore[int](t, dir, checkpoint.SaveEvery(5), checkpoint.WithRolling())
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
