//go:build unix

package dirstore_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"

	"github.com/gocheckpoint/checkpoint/storage"
)

// returnsWithin runs f and returns its error. Should f block on the named
// pipe fifo (the failure these tests prove absent), it fails the test after
// a generous bound instead of hanging the suite, and opens the pipe for
// writing so that the blocked open returns.
func returnsWithin(t *testing.T, fifo string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatalf("blocked on the named pipe %s", fifo)
		return nil
	}
}

func TestFIFOAtACheckpointNameNeverBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	info, err := s.Save(ctx, 2, 2)
	require.NoError(t, err)
	fifo := filepath.Join(dir, "step_00000003.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))

	err = returnsWithin(t, fifo, func() error { _, err := s.Save(ctx, 3, 3); return err })
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorIs(t, err, storage.ErrNotRegular)
	require.NotErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorContains(t, err, "named pipe")

	info.Step, info.Location = 3, fifo
	err = returnsWithin(t, fifo, func() error { _, _, err := s.LoadExact(ctx, info); return err })
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorIs(t, err, storage.ErrNotRegular)

	err = returnsWithin(t, fifo, func() error { _, _, err := s.Latest(ctx); return err })
	require.NoError(t, err, "Latest passes over what is not a checkpoint file")
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "the pipe is left where it is")
}

func TestLoadOfAStepWhoseNameIsNotARegularFileSaidNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	fifo := filepath.Join(dir, "step_00000003.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "step_00000004.json.gz"), 0o755))
	require.NoError(t, os.Symlink("step_00000001.json", filepath.Join(dir, "step_00000005.final.json")))

	// ErrNotFound tells a host to start afresh: what is at these names is
	// no checkpoint, but no absence of one either.
	for step, what := range map[int64]string{3: "named pipe", 4: "a directory", 5: "symbolic link"} {
		err := returnsWithin(t, fifo, func() error { _, _, err := s.Load(ctx, step); return err })
		require.ErrorIs(t, err, checkpoint.ErrCorrupt, "step %d", step)
		require.NotErrorIs(t, err, checkpoint.ErrNotFound, "step %d", step)
		require.ErrorContains(t, err, what)
		var e *checkpoint.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, "load", e.Op)
		require.Contains(t, e.Path, "step_0000000")
	}
	_, _, err = s.Load(ctx, 6)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

// Latest where the only things at checkpoint names are not regular files
// is no fresh start: ErrCorrupt, saying what is there. A symbolic link is
// such damage too (Save moves it aside), never followed.
func TestLatestBesideOnlyNonRegularFilesIsNoFreshStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, what string
		make       func(t *testing.T, path string)
	}{
		{"step_00000007.json", "named pipe", func(t *testing.T, path string) { require.NoError(t, syscall.Mkfifo(path, 0o644)) }},
		{"step_00000007.json", "a directory", func(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o755)) }},
		{"step_00000007.json", "symbolic link", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path+".real", []byte("{}"), 0o644))
			require.NoError(t, os.Symlink(filepath.Base(path)+".real", path))
		}},
		{"step_last.json", "symbolic link", func(t *testing.T, path string) { require.NoError(t, os.Symlink("/nonexistent", path)) }},
		{"step_last.json", "a directory", func(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o755)) }},
	} {
		t.Run(c.name+" "+c.what, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			c.make(t, filepath.Join(dir, c.name))
			s := openStore[int](t, dir, checkpoint.NoSync(), checkpoint.ReadOnly())
			for op, latest := range map[string]func(context.Context) (int, checkpoint.Info, error){"Latest": s.Latest, "LatestClean": s.LatestClean} {
				err := returnsWithin(t, dir, func() error { _, _, err := latest(ctx); return err })
				require.ErrorIs(t, err, checkpoint.ErrCorrupt, op)
				require.NotErrorIs(t, err, checkpoint.ErrNotFound, "%s: checkpoint.ErrNotFound would mean a fresh start", op)
				require.ErrorContains(t, err, c.what, op)
				require.ErrorContains(t, err, c.name, op)
			}
		})
	}
}

// Beside a checkpoint that loads, something at a newer checkpoint's name
// that is not a regular file is passed over as damage is: Latest returns
// the older checkpoint and reports what it passed.
func TestLatestReportsANonRegularFileItPassesOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var reported []error
	s := openStore[int](t, dir, checkpoint.NoSync(), checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) { reported = append(reported, err) }}))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "step_00000002.json"), 0o755))
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	require.Equal(t, int64(1), info.Step)
	require.Len(t, reported, 1)
	require.ErrorIs(t, reported[0], checkpoint.ErrCorrupt)
	require.ErrorContains(t, reported[0], "a directory")
}

func TestFIFOSideFileNeverBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	fifo := filepath.Join(dir, "notes.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	var v any
	err := returnsWithin(t, fifo, func() error { return s.ReadJSON(ctx, "notes.json", &v) })
	require.ErrorIs(t, err, storage.ErrNotRegular)
	require.ErrorContains(t, err, "named pipe")
}

func TestFIFOSessionFileNeverBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r, _ := openSessions(t, dir)
	_, err := r.Create(ctx, "run", nil)
	require.NoError(t, err)
	fifo := filepath.Join(dir, "run", sessionFile)
	require.NoError(t, os.Remove(fifo))
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))

	var list []checkpoint.Session
	err = returnsWithin(t, fifo, func() (err error) { list, err = r.List(ctx); return err })
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.ErrorIs(t, list[0].Err, checkpoint.ErrCorrupt)
	require.ErrorIs(t, list[0].Err, storage.ErrNotRegular)

	err = returnsWithin(t, fifo, func() error { _, err := checkpoint.OpenSessionStore[int](r, "run"); return err })
	require.ErrorIs(t, err, storage.ErrNotRegular)
	err = returnsWithin(t, fifo, func() error { _, _, err := checkpoint.ResumeLatestSession[int](ctx, r); return err })
	require.ErrorIs(t, err, storage.ErrNotRegular)
}

func TestSymlinkAtACheckpointNameIsMovedAsideNotItsTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	two, err := s.Save(ctx, 2, 2)
	require.NoError(t, err)
	target, err := os.ReadFile(two.Location)
	require.NoError(t, err)
	link := filepath.Join(dir, "step_00000003.json")
	require.NoError(t, os.Symlink("step_00000002.json", link))

	_, err = s.Save(ctx, 3, 3)
	require.NoError(t, err)
	fi, err := os.Lstat(link + quarantineSuffix)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link itself is moved aside")
	after, err := os.ReadFile(two.Location)
	require.NoError(t, err)
	require.Equal(t, target, after, "its target is untouched")
	v, _, err := s.Load(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, v)

	// The link moved aside is a leftover like any quarantined file, so
	// that checkpoint gc removes it (the link, never its target).
	left, err := s.Leftovers(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{link + quarantineSuffix}, left.Quarantined)
	_, err = s.RemoveLeftovers(ctx)
	require.NoError(t, err)
	require.NoFileExists(t, link+quarantineSuffix)
	after, err = os.ReadFile(two.Location)
	require.NoError(t, err)
	require.Equal(t, target, after, "its target is untouched")
}
