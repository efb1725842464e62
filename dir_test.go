package checkpoint

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Rename publishes without replacing: a file another program creates at
// the destination between any check and the move is never destroyed. The
// fault seam creates it at the last point before the move, both for a plain
// name (on Linux, system calls on the directory's descriptor) and for one
// that goes through os.Root.
func TestDirRenameNeverReplacesAFileCreatedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, to := range []string{"step_00000007.json.corrupt", "step 7.corrupt"} {
		t.Run(to, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			theirs := []byte("a file of another program")
			b, err := OpenDir(dir, NoSync(), withFaults(func(point, name string) error {
				if point == "quarantine" {
					require.NoError(t, os.WriteFile(filepath.Join(dir, to), theirs, 0o644))
				}
				return nil
			}))
			require.NoError(t, err)
			defer b.Close()
			_, err = b.Create(ctx, "step_00000007.json", writeString("damaged"))
			require.NoError(t, err)

			err = b.Rename(ctx, "step_00000007.json", to)
			require.ErrorIs(t, err, ErrExists)
			got, err := os.ReadFile(filepath.Join(dir, to))
			require.NoError(t, err)
			require.Equal(t, theirs, got, "Rename replaced a file created at its destination")
			got, err = os.ReadFile(filepath.Join(dir, "step_00000007.json"))
			require.NoError(t, err)
			require.Equal(t, "damaged", string(got), "a refused Rename changed its source")
		})
	}
}

// A file rewritten in place, with its size kept and its modification time
// restored (cp -p, rsync -t, a restore from backup), has a new Version, and
// a conditional Replace on the Version it had is a conflict that changes
// nothing.
func TestDirVersionChangesWhenRewrittenInPlace(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, "Windows' Lstat carries no inode change time: see objectOf")
	ctx := context.Background()
	dir := t.TempDir()
	b, err := OpenDir(dir, NoSync())
	require.NoError(t, err)
	defer b.Close()
	obj, err := b.Create(ctx, "step_last.json", writeString("rolling 1"))
	require.NoError(t, err)

	path := filepath.Join(dir, "step_last.json")
	rewriteInPlace(t, path, []byte("by hand 1")) // same size, same inode, same modification time
	now, err := b.Stat(ctx, "step_last.json")
	require.NoError(t, err)
	require.NotEqual(t, obj.Version, now.Version, "a rewrite in place kept the Version")

	_, err = b.Replace(ctx, "step_last.json", obj.Version, writeString("rolling 2"))
	require.ErrorIs(t, err, ErrConflict)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "by hand 1", string(got), "a conflicting Replace overwrote the rewrite")
}

// A fork of a session whose writer is running leaves the writer's rolling
// file as it was: its next save replaces it without a conflict (a hard link
// to it would change its Version).
func TestForkLeavesTheWritersRollingFileItsVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, err := OpenSessions(t.TempDir(), NoSync())
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(ctx, "a", nil)
	require.NoError(t, err)
	w, err := OpenSession[int](r, "a", Every(10), WithRolling())
	require.NoError(t, err)
	defer w.Close()
	for step := int64(0); step <= 1; step++ { // step 0 numbered, 1 rolling
		_, _, err = w.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}

	// Past the change time of the rolling file's last save, so that a
	// hard link made by the fork would show in its Version.
	passChangeTimeOf(t, filepath.Join(r.Dir(), "a", "step_last.json"), t.TempDir())
	_, err = r.Fork(ctx, "a", 1, nil)
	require.NoError(t, err)
	_, _, err = w.Tick(ctx, 2, 2)
	require.NoError(t, err, "the writer's rolling save after a fork")
}

func writeString(s string) func(w io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}
