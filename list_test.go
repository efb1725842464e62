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
