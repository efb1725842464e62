package checkpoint_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

func TestOpenRemovesStaleTempsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	stale := []string{".turn_002.json8812736", ".turn_last.json.gz77", ".result.json.ckpt-tmp-5", ".turn_002.json.ckpt-tmp-3"}
	foreign := []string{".bashrc", ".turn_002.json", "notes.json", ".x.json.tmp", "turn_003.json9", ".result.json5"}
	for _, name := range append(append([]string{}, stale...), foreign...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644))
	}
	r := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
	require.Len(t, dirNames(t, dir), 2+len(stale)+len(foreign), "a read-only open removes nothing")
	require.NoError(t, r.Close())

	openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	names := dirNames(t, dir)
	for _, name := range stale {
		require.NotContains(t, names, name)
	}
	for _, name := range append(foreign, "turn_001.json", ".checkpoint.lock") {
		require.Contains(t, names, name)
	}
}

func TestSecondWriterIsLockedReadOnlyWorks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir)
	_, err := checkpoint.Open[int](dir)
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	// The error says what a reader should do instead, and who holds it.
	require.ErrorContains(t, err, "open it with ReadOnly()")
	if runtime.GOOS == "linux" {
		require.ErrorContains(t, err, "(by this process: close the other Store first)")
	}

	r := openStore[int](t, dir, checkpoint.ReadOnly())
	_, err = w.Save(ctx, 1, 10)
	require.NoError(t, err)
	v, _, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, v)
	_, err = w.Save(ctx, 2, 20)
	require.NoError(t, err)
	v, _, err = r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 20, v)

	_, err = r.Save(ctx, 3, 30)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)
	require.ErrorIs(t, r.Delete(ctx, 1), checkpoint.ErrReadOnly)

	// The lock goes with Close.
	require.NoError(t, w.Close())
	w2, err := checkpoint.Open[int](dir)
	require.NoError(t, err)
	require.NoError(t, w2.Close())
}

func TestReadOnlyMissingDirIsNotFound(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := checkpoint.Open[int](dir, checkpoint.ReadOnly())
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.NoDirExists(t, dir)
}

func TestOpenCreatesNestedDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "campaigns", "session_001")
	s := openStore[int](t, dir)
	_, err := s.Save(context.Background(), 1, 1)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "step_00000001.json"))
}

func TestClosedStoreRefusesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := checkpoint.Open[int](t.TempDir())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second Close is a no-op")
	_, err = s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	_, _, err = s.Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	_, err = s.List(ctx)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	require.ErrorIs(t, s.Delete(ctx, 1), checkpoint.ErrClosed)
}

func TestCancelledContextDoesNoIO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{".checkpoint.lock"}, dirNames(t, dir))
	_, _, err = s.Load(ctx, 1)
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestDeleteRemovesEveryFileOfTheStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	_, err := s.SaveError(ctx, 2, 22, errors.New("boom"))
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, 2))
	_, _, err = s.Load(ctx, 2)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.ErrorIs(t, s.Delete(ctx, 2), checkpoint.ErrNotFound)
	require.Equal(t, []string{".checkpoint.lock", "turn_001.json", "turn_003.json"}, dirNames(t, dir))
	// A deleted step can be saved again.
	_, err = s.Save(ctx, 2, 222)
	require.NoError(t, err)
	v, _, err := s.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 222, v)
}

// TestDeleteExactRemovesOnlyTheCheckpointItNames: DeleteExact removes the
// one file of its Info and leaves the step's other kinds; an Info whose
// file now holds another checkpoint (saved since), or is gone, is
// ErrNotFound and removes nothing; a name not of the layout is ErrInvalid.
func TestDeleteExactRemovesOnlyTheCheckpointItNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.WithClock(func() time.Time {
		now = now.Add(time.Second)
		return now
	}))
	payload, err := s.SaveFrom(ctx, 1, func(w io.Writer) error { _, err := w.Write([]byte("raw")); return err })
	require.NoError(t, err)
	step2, err := s.Save(ctx, 2, 2)
	require.NoError(t, err)
	errInfo, err := s.SaveError(ctx, 2, 22, errors.New("boom"))
	require.NoError(t, err)

	require.NoError(t, s.DeleteExact(ctx, step2))
	require.Equal(t, []string{".checkpoint.lock", "turn_001.json", "turn_002.error.json"}, dirNames(t, dir))
	require.ErrorIs(t, s.DeleteExact(ctx, step2), checkpoint.ErrNotFound, "a second DeleteExact of a removed checkpoint")
	require.NoError(t, s.DeleteExact(ctx, errInfo))
	require.Equal(t, []string{".checkpoint.lock", "turn_001.json"}, dirNames(t, dir))

	// Step 2 saved again: the old Info names a checkpoint that is gone.
	_, err = s.Save(ctx, 2, 222)
	require.NoError(t, err)
	err = s.DeleteExact(ctx, step2)
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "DeleteExact of an Info whose file holds a newer checkpoint")
	require.Contains(t, err.Error(), "turn_002.json")
	v, _, err := s.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 222, v)

	require.NoError(t, s.DeleteExact(ctx, payload))
	require.Equal(t, []string{".checkpoint.lock", "turn_002.json"}, dirNames(t, dir))

	bad := step2
	bad.Location = filepath.Join(dir, "notes.txt")
	require.ErrorIs(t, s.DeleteExact(ctx, bad), checkpoint.ErrInvalid)
}

// TestDeleteExactOfAnUnreadableCheckpointNeverRemovesOneSavedSince: an
// Info of a file whose header did not read (Format 0) removes that file
// while it is still unreadable, but once a save has moved it aside and
// published a good checkpoint at its name, DeleteExact of the old Info is
// ErrNotFound and the good checkpoint stays.
func TestDeleteExactOfAnUnreadableCheckpointNeverRemovesOneSavedSince(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	damaged := func() checkpoint.Info {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000005.json"), []byte("not a checkpoint"), 0o644))
		infos, err := s.List(ctx)
		require.NoError(t, err)
		require.Len(t, infos, 1)
		require.Zero(t, infos[0].Format)
		return infos[0]
	}
	require.NoError(t, s.DeleteExact(ctx, damaged()))
	require.NotContains(t, dirNames(t, dir), "step_00000005.json")

	stale := damaged()
	_, err := s.Save(ctx, 5, 55) // moves the damaged file aside
	require.NoError(t, err)
	require.ErrorIs(t, s.DeleteExact(ctx, stale), checkpoint.ErrNotFound)
	v, _, err := s.Load(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, 55, v)
}

// TestOpenOnAFIFOFailsWithoutHanging: Open on a path that is a FIFO fails,
// never hangs. (OpenSessions on one:
// TestOpenSessionsOnAFIFOFailsWithoutHanging.)
func TestOpenOnAFIFOFailsWithoutHanging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "store"))
	done := make(chan error, 1)
	go func() { _, err := checkpoint.Open[int](filepath.Join(dir, "store")); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Open on a FIFO hangs")
	}
}
