//go:build unix

package dirstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
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

// A named pipe at a checkpoint's name never blocks a call: Save of that
// step and LoadExact of it are ErrCorrupt and storage.ErrNotRegular,
// saying "named pipe" (not ErrExists), Latest passes over it, and the pipe
// stays where it is.
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

// Load of a step whose name holds a named pipe, a directory or a symbolic
// link is ErrCorrupt naming what is there, never ErrNotFound (which tells a
// host to start afresh), as a load's *checkpoint.Error on that path.
func TestLoadOfAStepWhoseNameIsNotARegularFileIsCorruptNotNotFound(t *testing.T) {
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

// A named pipe at a side file's name never blocks ReadJSON: it is
// storage.ErrNotRegular, saying "named pipe".
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

// A named pipe at a session's session.json never blocks: List lists the
// session with an Err of ErrCorrupt and storage.ErrNotRegular, and opening
// or resuming it is storage.ErrNotRegular.
func TestFIFOSessionFileNeverBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
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

// A symbolic link at the name of the step being saved is moved aside
// itself, its target untouched, and the step saves; the link moved aside
// is a quarantined leftover, and RemoveLeftovers removes the link, never
// its target.
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

// An entry that appears at a checkpoint's name between the save's look
// and its publish (a symbolic link, a dangling one, a directory, a named
// pipe, another program's file) is treated as if it had been there
// before: a numbered checkpoint never replaces it (one that is no regular
// file fails the save, naming it, and stays; a link or a foreign file is
// moved aside as it is, and the step saves), the rolling file replaces it
// with a whole file of its own, no temporary file is left, and the
// checkpoint saved before is untouched.
func TestEntryAppearingAtTheNameDuringPublishIsTreatedAsIfItWasThereBefore(t *testing.T) {
	t.Parallel()
	platformtest.SkipUnlessLinux(t)
	ctx := context.Background()
	plants := map[string]func(t *testing.T, p string){
		"symlink": func(t *testing.T, p string) {
			require.NoError(t, os.Symlink(filepath.Join(filepath.Dir(p), "c_001.json"), p))
		},
		"dangling": func(t *testing.T, p string) { require.NoError(t, os.Symlink("/nonexistent/x", p)) },
		"dir":      func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o755)) },
		"fifo":     func(t *testing.T, p string) { require.NoError(t, syscall.Mkfifo(p, 0o644)) },
		"file":     func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, []byte("theirs"), 0o644)) },
	}
	for what, plant := range plants {
		for _, rolling := range []bool{false, true} {
			name := what
			if rolling {
				name += "-rolling"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				armed := false
				target := "c_002.json"
				if rolling {
					target = "c_last.json"
				}
				fault := func(point, n string) error {
					if armed && point == "publish" && n == target {
						armed = false
						plant(t, filepath.Join(dir, n))
					}
					return nil
				}
				s := openFaulty[int](t, dir, fault, nil, checkpoint.WithLayout("c", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(100))
				_, err := s.Save(ctx, 1, 1)
				require.NoError(t, err)
				armed = true
				if rolling {
					_, _, err = s.Tick(ctx, 2, 2)
				} else {
					_, err = s.Save(ctx, 2, 2)
				}
				t.Logf("%s: %v", name, err)
				fi, lerr := os.Lstat(filepath.Join(dir, target))
				require.NoError(t, lerr)
				for _, n := range dirNames(t, dir) {
					require.False(t, strings.Contains(n, tempMarker), "temporary file %s left", n)
				}
				switch {
				case what == "dir" || what == "fifo" && !rolling:
					// Not a regular file: an error saying so, and left
					// where it is (a directory cannot be replaced by a
					// file).
					require.Error(t, err)
					require.False(t, fi.Mode().IsRegular())
				case !rolling:
					// A numbered checkpoint never replaces. What was put
					// at the name between the save's look and its publish
					// is looked at as if it had been there before: a
					// symlink, or a file that is no checkpoint, is moved
					// aside as it is, and the step saves.
					require.NoError(t, err)
					require.True(t, fi.Mode().IsRegular())
					q, err := os.Lstat(filepath.Join(dir, target+".corrupt"))
					require.NoError(t, err)
					if what == "file" {
						b, err := os.ReadFile(filepath.Join(dir, target+".corrupt"))
						require.NoError(t, err)
						require.Equal(t, "theirs", string(b))
					} else {
						require.NotZero(t, q.Mode()&os.ModeSymlink, "the link is moved, not its target")
					}
					got, _, err := s.Load(ctx, 2)
					require.NoError(t, err)
					require.Equal(t, 2, got)
				default:
					// The rolling file replaces what is at its name
					// (rename over it); the result must be our file.
					require.NoError(t, err)
					require.True(t, fi.Mode().IsRegular())
					got, info, err := s.Latest(ctx)
					require.NoError(t, err)
					require.Equal(t, int64(2), info.Step)
					require.Equal(t, 2, got)
				}
				got, _, err := s.Load(ctx, 1)
				require.NoError(t, err)
				require.Equal(t, 1, got)
				b, err := os.ReadFile(filepath.Join(dir, "c_001.json"))
				require.NoError(t, err)
				require.Contains(t, string(b), `"step":1`)
			})
		}
	}
}
