package dirstore_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
)

// TestPruneWhileAReaderHoldsTheCheckpoint: a reader of this library (another
// process loading the same store) has a checkpoint open while the writer
// deletes it. Windows refuses that unless the reader shares delete access;
// the delete must succeed at once and the reader still read the whole file.
func TestPruneWhileAReaderHoldsTheCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	info, err := s.Save(ctx, 1, 11)
	require.NoError(t, err)
	_, err = s.Save(ctx, 2, 22)
	require.NoError(t, err)
	want, err := os.ReadFile(info.Location)
	require.NoError(t, err)

	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	f, err := dirstore.OpenForRead(root, filepath.Base(info.Location))
	require.NoError(t, err)
	defer f.Close()

	start := time.Now()
	require.NoError(t, s.Delete(ctx, 1), "a reader's open file does not stop a delete")
	require.Less(t, time.Since(start), dirstore.InUseWait/2, "the delete did not wait for the reader")
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, want, got, "the reader reads the checkpoint it opened")
	require.NoError(t, f.Close())
	_, err = os.Stat(info.Location)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, _, err = s.Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

// TestReplaceRollingWhileAReaderHoldsIt: the rolling file is replaced while
// a reader has the old one open; the save succeeds and the reader keeps the
// old bytes. This needs the POSIX rename of NTFS (Windows 10 1607 and
// later); on a volume without it the replacement waits for the reader (see
// retryInUse).
func TestReplaceRollingWhileAReaderHoldsIt(t *testing.T) {
	t.Parallel()
	platformtest.SkipUnderWine(t, "Wine 8 has no POSIX rename (FileRenameInformationEx): as on a FAT volume, a file that is open cannot be renamed over")
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync(), checkpoint.WithRolling(), checkpoint.SaveEvery(100))
	_, _, err := s.Tick(ctx, 1, 1)
	require.NoError(t, err)
	rolling := filepath.Join(dir, "step_last.json")
	old, err := os.ReadFile(rolling)
	require.NoError(t, err)

	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	f, err := dirstore.OpenForRead(root, "step_last.json")
	require.NoError(t, err)
	defer f.Close()

	_, _, err = s.Tick(ctx, 2, 2)
	require.NoError(t, err, "a reader's open file does not stop the rolling file's replacement")
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, old, got)
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	require.Equal(t, 2, v)
}
