package checkpoint_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/stretchr/testify/require"
)

func TestDetectLayoutsFindsEachLayoutAndCountsItsFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files []string
		want  []checkpoint.Layout
	}{
		{"empty", nil, nil},
		{"side files only", []string{"session.json", "result.json", "config_v2.json", ".checkpoint.lock"}, nil},
		{"default layout", []string{"step_00000001.json", "step_00000002.json.gz", "step_00000002.final.json", "step_last.json"},
			[]checkpoint.Layout{{"step", 8, 4}}},
		{"padded", []string{"turn_007.json", "turn_008.error.json", "turn_008.error-2.json.gz", "turn_1234.json"},
			[]checkpoint.Layout{{"turn", 3, 4}}},
		{"step zero", []string{"turn_0.json"}, []checkpoint.Layout{{"turn", 1, 1}}},
		{"no padding seen: 8 if it fits", []string{"run_12345678.json", "run_99999999.json"}, []checkpoint.Layout{{"run", 8, 2}}},
		{"no padding seen: the widest that fits", []string{"turn_10.json", "turn_11.json"}, []checkpoint.Layout{{"turn", 2, 2}}},
		{"rolling file only", []string{"turn_last.json.gz"}, []checkpoint.Layout{{"turn", 8, 1}}},
		{"prefix with underscores and dots", []string{"my_run.v2_0001.json"}, []checkpoint.Layout{{"my_run.v2", 4, 1}}},
		{"temps and quarantined files count", []string{".turn_007.json123", "turn_005.json.corrupt", "turn_005.json.corrupt-2"},
			[]checkpoint.Layout{{"turn", 3, 3}}},
		{"two prefixes, most files first", []string{"turn_001.json", "step_00000001.json", "step_00000002.json"},
			[]checkpoint.Layout{{"step", 8, 2}, {"turn", 3, 1}}},
		{"one prefix, two widths", []string{"turn_007.json", "turn_008.json", "turn_0009.json"},
			[]checkpoint.Layout{{"turn", 3, 2}, {"turn", 4, 1}}},
		{"not checkpoint names", []string{
			"turn_7.json.bak", "turn_.json", "turn_007.step.json", "turn_007.error-1.json", "_007.json", ".turn_007.json",
			"turn_007.json.corrupt-1", "turn_007.json.corrupt-02", "turn_99999999999999999999.json", ".x_1.json12.corrupt",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			touch(t, dir, tt.files...)
			require.NoError(t, os.Mkdir(filepath.Join(dir, "step_00000009.json"), 0o755)) // not a regular file
			got, err := checkpoint.DetectLayouts(dir)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)

			b, err := dirstore.Open(dir, dirstore.ReadOnly())
			require.NoError(t, err)
			defer b.Close()
			got, err = checkpoint.DetectBackendLayouts(context.Background(), b)
			require.NoError(t, err)
			require.Equal(t, tt.want, got, "DetectBackendLayouts")
		})
	}
}

func TestDetectLayoutsOfMissingDirIsErrNotFound(t *testing.T) {
	t.Parallel()
	_, err := checkpoint.DetectLayouts(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

func TestDetectedLayoutOpensTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.Gzip())
	for step := int64(1); step <= 3; step++ {
		_, err := w.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())

	layouts, err := checkpoint.DetectLayouts(dir)
	require.NoError(t, err)
	require.Equal(t, []checkpoint.Layout{{"turn", 3, 3}}, layouts)
	require.Equal(t, "turn/3", layouts[0].String())
	r := openStore[json.RawMessage](t, dir, checkpoint.ReadOnly(), layouts[0].Option())
	state, info, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), info.Step)
	require.JSONEq(t, "3", string(state))
}

func TestLeftoversListsTempsAndQuarantinedOfTheLayoutOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	_, err := w.Save(ctx, 1, 1)
	require.NoError(t, err)
	touch(t, dir,
		".turn_002.json123", ".result.json.ckpt-tmp-9", // temps of a checkpoint and of a side file
		"turn_001.json.corrupt", "turn_001.json.corrupt-2", // quarantined
		".step_00000002.json.ckpt-tmp-1", // a temp of another layout: it is a side file name here, so it is the store's
		"step_00000001.json.corrupt", "turn_001.json.corrupt-x", "notes.txt", ".bashrc",
		".notes.json2", // a user's hidden file, named like an unmarked temp of a side file
	)

	r := openStore[int](t, dir, checkpoint.ReadOnly(), checkpoint.WithLayout("turn", 3))
	got, err := r.Leftovers(ctx)
	require.NoError(t, err)
	want := checkpoint.Leftovers{
		Temps:       []string{filepath.Join(dir, ".result.json.ckpt-tmp-9"), filepath.Join(dir, ".step_00000002.json.ckpt-tmp-1"), filepath.Join(dir, ".turn_002.json123")},
		Quarantined: []string{filepath.Join(dir, "turn_001.json.corrupt"), filepath.Join(dir, "turn_001.json.corrupt-2")},
	}
	require.Equal(t, want.Temps, got.Temps)
	require.Equal(t, want.Quarantined, got.Quarantined)

	_, err = r.RemoveLeftovers(ctx)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)

	removed, err := w.RemoveLeftovers(ctx)
	require.NoError(t, err)
	require.Equal(t, want, removed)
	require.ElementsMatch(t, []string{".checkpoint.lock", "turn_001.json", "step_00000001.json.corrupt", "turn_001.json.corrupt-x", "notes.txt", ".bashrc", ".notes.json2"}, dirNames(t, dir))
	_, _, err = w.Load(ctx, 1)
	require.NoError(t, err, "checkpoints are never leftovers")

	again, err := w.RemoveLeftovers(ctx)
	require.NoError(t, err)
	require.Empty(t, again.Temps)
	require.Empty(t, again.Quarantined)
}

func TestLeftoversOfAQuarantinedCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir)
	info, err := w.Save(ctx, 5, 5)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(info.Path, []byte(`{"format":1`), 0o644)) // truncated
	_, err = w.Save(ctx, 5, 5)                                                // moves the damaged file aside
	require.NoError(t, err)

	got, err := w.Leftovers(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{info.Path + ".corrupt"}, got.Quarantined)
}

func TestLeftoversSaysWhetherAWriterHoldsTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openStore[int](t, dir, checkpoint.ReadOnly())
	left, err := r.Leftovers(ctx)
	require.NoError(t, err)
	free, held, holder := checkpoint.LockNotSeen, checkpoint.LockHeld, os.Getpid()
	if runtime.GOOS != "linux" {
		free, held, holder = checkpoint.LockUnknown, checkpoint.LockUnknown, 0
	}
	require.Equal(t, free, left.Lock, "no writer has opened the store")

	w := openStore[int](t, dir, checkpoint.NoSync())
	left, err = r.Leftovers(ctx)
	require.NoError(t, err)
	require.Equal(t, held, left.Lock)
	require.Equal(t, holder, left.LockHolder)

	require.NoError(t, w.Close())
	left, err = r.Leftovers(ctx)
	require.NoError(t, err)
	require.Equal(t, free, left.Lock, "the writer is gone")
	require.Zero(t, left.LockHolder)
}
