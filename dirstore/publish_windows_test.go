package dirstore

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/windows"

	"github.com/gocheckpoint/checkpoint/storage"
)

// heldFile makes the file held.json in a new directory and opens it as
// another program would, without delete sharing (os.Open does not share
// it). It returns the directory's root, the file's path and the open file.
func heldFile(t *testing.T) (*os.Root, string, *os.File) {
	dir := t.TempDir()
	path := filepath.Join(dir, "held.json")
	require.NoError(t, os.WriteFile(path, []byte("{}"), 0o644))
	holder, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	return root, path, holder
}

// TestRemoveRetriesWhileAnotherProgramHoldsTheFile: a program that opened
// a file without delete sharing makes a removal
// fail with a sharing violation; the removal is retried and succeeds once
// the program lets go.
func TestRemoveRetriesWhileAnotherProgramHoldsTheFile(t *testing.T) {
	t.Parallel()
	root, path, holder := heldFile(t)

	attempts := 0
	err := retryInUseFor(inUseWait, func() error {
		attempts++
		err := root.Remove("held.json")
		if attempts == 1 {
			require.True(t, inUse(err), "the first removal meets the holder: %v", err)
			require.NoError(t, holder.Close()) // the other program lets go
		}
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 2, attempts)
	require.NoFileExists(t, path)
}

// TestRemoveFailsClearlyWhenTheFileStaysHeld: a removal that keeps meeting
// another program's hold fails after the wait, saying so and wrapping the
// Windows error; the file is untouched.
func TestRemoveFailsClearlyWhenTheFileStaysHeld(t *testing.T) {
	t.Parallel()
	root, path, _ := heldFile(t)

	wait := 20 * time.Millisecond
	err := retryInUseFor(wait, func() error { return root.Remove("held.json") })
	require.Error(t, err)
	require.True(t, inUse(err), "wraps the Windows error: %v", err)
	require.ErrorContains(t, err, "still in use by another program after retrying for 20ms")
	require.ErrorContains(t, err, "held.json")
	require.FileExists(t, path)
}

// TestRetryInUseGivesUpAtOnceOnOtherErrors: only a hold is waited for.
func TestRetryInUseGivesUpAtOnceOnOtherErrors(t *testing.T) {
	t.Parallel()
	attempts := 0
	err := retryInUseFor(time.Hour, func() error {
		attempts++
		return &fs.PathError{Op: "remove", Path: "x", Err: windows.ERROR_FILE_NOT_FOUND}
	})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Equal(t, 1, attempts)
}

// TestMoveNoReplaceNeverReplaces: the publish of volumes without hard links
// (FAT32, exFAT) fails on an existing name and leaves it byte-identical.
func TestMoveNoReplaceNeverReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new.tmp"), []byte("new"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_1.json"), []byte("old"), 0o644))

	err = moveNoReplace(root, "new.tmp", "step_1.json")
	require.ErrorIs(t, err, fs.ErrExist)
	require.ErrorContains(t, err, "step_1.json")
	b, err := os.ReadFile(filepath.Join(dir, "step_1.json"))
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	require.FileExists(t, filepath.Join(dir, "new.tmp"))

	require.NoError(t, moveNoReplace(root, "new.tmp", "step_2.json"))
	b, err = os.ReadFile(filepath.Join(dir, "step_2.json"))
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
	require.NoFileExists(t, filepath.Join(dir, "new.tmp"))

	require.ErrorIs(t, moveNoReplace(root, "missing.tmp", "step_3.json"), fs.ErrNotExist)
	require.Error(t, moveNoReplace(root, `..\new.tmp`, "step_4.json"), "a name that leaves the directory is refused")
}

// TestWriterLockIsHeldByTheHandle: the LockFileEx lock refuses a second
// writer of the same directory, in this process too, and frees the
// directory when the first writer closes.
func TestWriterLockIsHeldByTheHandle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	f, err := lockDir(root)
	require.NoError(t, err)
	_, err = lockDir(root)
	require.ErrorIs(t, err, storage.ErrLocked)
	require.NoError(t, f.release())
	g, err := lockDir(root)
	require.NoError(t, err)
	require.NoError(t, g.release())
}
