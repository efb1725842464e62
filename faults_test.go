package checkpoint_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"

	"github.com/stretchr/testify/require"
)

// TestDiskFullFailsCleanly fills a real filesystem. The save that does not
// fit fails with an error wrapping ENOSPC that names the file, leaves no
// partial checkpoint or temporary file, the earlier checkpoints still load,
// and once space is freed saving works again.
func TestDiskFullFailsCleanly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := tinyDisk(t, "size=1m")
	for _, gz := range []bool{false, true} {
		sub := filepath.Join(dir, map[bool]string{false: "plain", true: "gzip"}[gz])
		opts := []checkpoint.Option{checkpoint.WithLayout("c", 3)}
		if gz {
			opts = append(opts, checkpoint.Gzip())
		}
		s := openDurableStore[paddedState](t, sub, opts...)
		var full error
		var saved []int64
		for step := int64(1); step <= 200 && full == nil; step++ {
			// Incompressible enough that gzip fills the disk too.
			st := paddedState{Step: step, Pad: randomText(step, 96<<10)}
			if _, err := s.Save(ctx, step, st); err != nil {
				full = err
				break
			}
			saved = append(saved, step)
		}
		require.Error(t, full, "gzip=%v: the disk never filled", gz)
		require.ErrorIs(t, full, syscall.ENOSPC, "gzip=%v", gz)
		var e *checkpoint.Error
		require.ErrorAs(t, full, &e)
		require.Equal(t, "save", e.Op)
		require.NotEmpty(t, saved)
		next := saved[len(saved)-1] + 1
		require.Equal(t, next, e.Step)
		require.Contains(t, e.Path, sub)

		for _, name := range dirNames(t, sub) {
			require.False(t, strings.HasPrefix(name, ".c_"), "gzip=%v: temporary file %s left after ENOSPC", gz, name)
		}
		_, _, err := s.Load(ctx, next)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, "no partial checkpoint of the failed step")
		for _, step := range saved {
			got, _, err := s.Load(ctx, step)
			require.NoError(t, err, "gzip=%v step %d", gz, step)
			require.Equal(t, step, got.Step)
		}
		got, info, err := s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, saved[len(saved)-1], info.Step)
		require.Equal(t, info.Step, got.Step)

		// Free space: the same step saves now.
		for _, step := range saved[:len(saved)/2+1] {
			require.NoError(t, s.Delete(ctx, step))
		}
		_, err = s.Save(ctx, next, paddedState{Step: next, Pad: randomText(next, 96<<10)})
		require.NoError(t, err, "gzip=%v: saving after space was freed", gz)
		got, _, err = s.Load(ctx, next)
		require.NoError(t, err)
		require.Equal(t, next, got.Step)
		require.NoError(t, s.Close())
		require.NoError(t, os.RemoveAll(sub))
	}
}

// A real full disk under the directory's descriptor-based writer, with
// states that fit its write buffer (the bytes reach the file only at Sync,
// or at Close with NoSync) and states that pass through it: the save that
// does not fit fails with ENOSPC naming its step and file and leaves no
// debris; a rolling file and a side file on the full disk fail alike and
// the old ones stay whole; every saved step loads; once space is freed,
// everything saves again.
func TestDiskFullFailsSavesRollingAndSideWritesCleanly(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	cases := []struct {
		name string
		size int // state padding
		opts []checkpoint.Option
	}{
		{"plain-small", 40 << 10, nil},
		{"plain-small-nosync", 40 << 10, []checkpoint.Option{checkpoint.NoSync()}},
		{"plain-at-buffer", checkpoint.FdTempBuffer - 120, nil},
		{"plain-large", 150 << 10, nil},
		{"gzip-small", 40 << 10, []checkpoint.Option{checkpoint.Gzip()}},
		{"zstd-small", 40 << 10, []checkpoint.Option{checkpoint.Zstd()}},
		{"zstd-large-nosync", 150 << 10, []checkpoint.Option{checkpoint.Zstd(), checkpoint.NoSync()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := tinyDisk(t, "size=1m")
			opts := append([]checkpoint.Option{checkpoint.WithLayout("c", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(1000)}, c.opts...)
			s, err := checkpoint.Open[paddedState](dir, opts...)
			require.NoError(t, err)
			defer s.Close()
			st := func(step int64) paddedState { return paddedState{Step: step, Pad: randomText(step, c.size)} }

			// A rolling file and a side file exist before the disk fills.
			_, saved, err := s.Tick(ctx, 1, st(1))
			require.NoError(t, err)
			require.True(t, saved)
			require.NoError(t, s.WriteJSON(ctx, "side.json", st(1)))

			var full error
			last := int64(0)
			for step := int64(2); step < 200; step++ {
				if _, err := s.Save(ctx, step, st(step)); err != nil {
					full = err
					break
				}
				last = step
			}
			require.Error(t, full, "the disk never filled")
			t.Logf("full: %v", full)
			require.ErrorIs(t, full, syscall.ENOSPC)
			var e *checkpoint.Error
			require.ErrorAs(t, full, &e)
			require.Equal(t, last+1, e.Step)
			require.Contains(t, e.Path, dir)
			checkNoDebris(t, s, dir, "after the failed save")
			_, _, err = s.Load(ctx, last+1)
			require.ErrorIs(t, err, checkpoint.ErrNotFound)

			// Top the disk up to the last byte with a plain file, so the
			// rolling file and the side file cannot be written either.
			filler := filepath.Join(dir, "filler")
			f, err := os.Create(filler)
			require.NoError(t, err)
			buf := make([]byte, 4096)
			for {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
			for {
				if _, err := f.Write(buf[:1]); err != nil {
					break
				}
			}
			f.Close()

			_, _, err = s.Tick(ctx, last+1, st(last+1)) // the rolling file
			require.ErrorIs(t, err, syscall.ENOSPC, "rolling replace on a full disk")
			err = s.WriteJSON(ctx, "side.json", st(last+1))
			require.ErrorIs(t, err, syscall.ENOSPC, "side file on a full disk")
			checkNoDebris(t, s, dir, "after the failed rolling and side writes")
			var side paddedState
			require.NoError(t, s.ReadJSON(ctx, "side.json", &side))
			require.Equal(t, st(1), side, "the old side file is intact")
			got, info, err := s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, last, info.Step)
			require.Equal(t, st(last), got)
			for step := int64(2); step <= last; step++ {
				got, _, err := s.Load(ctx, step)
				require.NoError(t, err, "step %d", step)
				require.Equal(t, st(step), got)
			}

			// Free space: everything works again.
			require.NoError(t, os.Remove(filler))
			for step := int64(2); step <= last; step++ {
				require.NoError(t, s.Delete(ctx, step))
			}
			_, err = s.Save(ctx, last+1, st(last+1))
			require.NoError(t, err)
			_, _, err = s.Tick(ctx, last+2, st(last+2))
			require.NoError(t, err)
			require.NoError(t, s.WriteJSON(ctx, "side.json", st(last+2)))
			checkNoDebris(t, s, dir, "after space was freed")
			require.NoError(t, s.Close())
		})
	}
}

// On a tmpfs out of inodes, where the temporary file cannot be created at
// all, the save fails with ENOSPC (not ErrCorrupt) and leaves no debris,
// the saved steps load, and once an inode is freed the next save works.
func TestOutOfInodesFailsSavesCleanly(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := tinyDisk(t, "size=8m,nr_inodes=8")
	s, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 3))
	require.NoError(t, err)
	defer s.Close()
	var full error
	last := int64(0)
	for step := int64(1); step < 50; step++ {
		if _, err := s.Save(ctx, step, int(step)); err != nil {
			full = err
			break
		}
		last = step
	}
	require.Error(t, full)
	t.Logf("full: %v", full)
	require.ErrorIs(t, full, syscall.ENOSPC)
	require.Positive(t, last)
	checkNoDebris(t, s, dir, "out of inodes")
	for step := int64(1); step <= last; step++ {
		got, _, err := s.Load(ctx, step)
		require.NoError(t, err)
		require.Equal(t, int(step), got)
	}
	require.NoError(t, s.Delete(ctx, 1))
	_, err = s.Save(ctx, last+1, int(last+1))
	require.NoError(t, err)
	require.False(t, errors.Is(full, checkpoint.ErrCorrupt))
}

// Saves failing on a full disk, over and over, leak no descriptor and no
// temporary file; the longest names a layout or a side file can have fit.
func TestSavesFailingOnAFullDiskLeakNothing(t *testing.T) {
	skipUnlessLinux(t)
	ctx := context.Background()
	dir := tinyDisk(t, "size=256k")
	prefix := strings.Repeat("p", 64)
	s, err := checkpoint.Open[paddedState](dir, checkpoint.WithLayout(prefix, 19), checkpoint.Gzip())
	require.NoError(t, err)
	defer s.Close()
	side := strings.Repeat("s", 195) + ".json"
	require.NoError(t, s.WriteJSON(ctx, side, 1))
	_, err = s.SaveError(ctx, 1, paddedState{Step: 1}, errors.New("x"))
	require.NoError(t, err)
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	step := int64(2)
	for ; step < 100; step++ {
		if _, err := s.Save(ctx, step, paddedState{Step: step, Pad: randomText(step, 100<<10)}); err != nil {
			break
		}
	}
	before := fds()
	for i := 0; i < 30; i++ {
		_, err := s.Save(ctx, step, paddedState{Step: step, Pad: randomText(step, 100<<10)})
		require.ErrorIs(t, err, syscall.ENOSPC)
		_, _, err = s.Tick(ctx, step, paddedState{Step: step, Pad: randomText(step, 100<<10)})
		require.Error(t, err)
	}
	require.LessOrEqual(t, fds(), before+2, "descriptors leaked by failing saves")
	checkNoDebris(t, s, dir, "after 60 failing writes")
}

// tinyDisk mounts a tmpfs of the mount options opts ("size=1m") on a fresh
// directory and returns it; the test is skipped where mounting is not
// permitted (not root, a container without the capability).
func tinyDisk(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); the disk-full tests need root", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// checkNoDebris: no temporary file, and every checkpoint name loads.
func checkNoDebris[T any](t *testing.T, s *checkpoint.Store[T], dir, what string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range dirNames(t, dir) {
		require.False(t, strings.Contains(name, checkpoint.TempMarker), "%s: temporary file %s left", what, name)
		if s.IsCheckpointName(name) {
			f, err := os.Open(filepath.Join(dir, name))
			require.NoError(t, err)
			_, err = readEnvelope(f, checkpoint.DefaultMaxReadSize)
			f.Close()
			require.NoError(t, err, "%s: %s is partial", what, name)
		}
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	for _, info := range list {
		_, _, err := s.LoadExact(ctx, info)
		require.NoError(t, err, "%s: %s", what, info.Path)
	}
}

// TestPermissionDeniedIsAnErrorNeverDamage runs as an unprivileged user
// (root ignores file modes): a read-only directory refuses saves with a
// clear error and keeps its checkpoints loadable; an unreadable checkpoint
// is a permission error, not corruption, and is never moved aside.
func TestPermissionDeniedIsAnErrorNeverDamage(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, "file modes do not restrict access (Chmod sets only the read-only attribute)")
	if os.Geteuid() == 0 {
		platformtest.RerunAsNobody(t)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("c", 3))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}

	// A directory that has become read-only.
	require.NoError(t, os.Chmod(dir, 0o555))
	_, err := s.Save(ctx, 4, 4)
	require.ErrorIs(t, err, fs.ErrPermission)
	var e *checkpoint.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, int64(4), e.Step)
	require.Contains(t, err.Error(), filepath.Join(dir, "c_004.json"))
	_, err = s.Prune(ctx)
	require.NoError(t, err, "no rule: nothing to remove")
	require.ErrorIs(t, s.Delete(ctx, 1), fs.ErrPermission)
	v, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, s.Close())

	// A writer cannot open a new store where it may not create one.
	locked := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(locked, 0o555))
	_, err = checkpoint.Open[int](locked)
	require.ErrorIs(t, err, fs.ErrPermission)
	require.Contains(t, err.Error(), locked)
	r := openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.ReadOnly())

	// An unreadable checkpoint.
	newest := filepath.Join(dir, "c_003.json")
	require.NoError(t, os.Chmod(newest, 0))
	_, _, err = r.Load(ctx, 3)
	require.ErrorIs(t, err, fs.ErrPermission)
	require.False(t, errors.Is(err, checkpoint.ErrCorrupt), "a permission problem is not damage")
	require.Contains(t, err.Error(), newest)
	var skipped []error
	s = openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) { skipped = append(skipped, err) }}))
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step, "Latest falls back past the file it cannot read")
	require.Equal(t, 2, v)
	require.Len(t, skipped, 1)
	require.ErrorIs(t, skipped[0], fs.ErrPermission)
	_, err = s.Save(ctx, 3, 33)
	require.ErrorIs(t, err, fs.ErrPermission, "the step is taken by a file the writer cannot check: it says so")
	require.NoFileExists(t, newest+".corrupt", "an unreadable file is never moved aside")
	require.NoError(t, os.Chmod(newest, 0o644))
	v, _, err = s.Load(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, v, "the file is as it was")
}

// On a full disk, Delete of a session fails cleanly (it writes its
// tombstone before it removes anything): the session stays whole, listed
// with every checkpoint, each of which loads, and no debris is left. Once
// space is freed, Delete removes it.
func TestDiskFullDeleteOfASessionLeavesItWhole(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := tinyDisk(t, "size=1m")
	r, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("c", 3))
	require.NoError(t, err)
	defer r.Close()
	for _, id := range []string{"full", "other"} {
		_, err := r.Create(ctx, id, nil)
		require.NoError(t, err)
	}
	other, err := checkpoint.OpenSessionStore[paddedState](r, "other")
	require.NoError(t, err)
	_, err = other.Save(ctx, 1, paddedState{Step: 1, Pad: randomText(1, 200<<10)})
	require.NoError(t, err)
	require.NoError(t, other.Close())
	s, err := checkpoint.OpenSessionStore[paddedState](r, "full")
	require.NoError(t, err)
	saved := 0
	for step := int64(1); step < 100; step++ {
		if _, err := s.Save(ctx, step, paddedState{Step: step, Pad: randomText(step, 40<<10)}); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
		saved++
	}
	require.NoError(t, s.Close())
	require.Greater(t, saved, 2)
	// Fill what is left, byte by byte, so that not even a tombstone fits.
	filler, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	for _, n := range []int{64 << 10, 4 << 10, 512, 1} {
		for {
			if _, err := filler.Write(make([]byte, n)); err != nil {
				break
			}
		}
	}
	require.NoError(t, filler.Close())

	err = r.Delete(ctx, "full")
	require.Error(t, err)
	require.ErrorIs(t, err, syscall.ENOSPC, "names the full disk")
	got, err := r.Get(ctx, "full")
	require.NoError(t, err, "the session stays, whole")
	require.Equal(t, saved, got.Checkpoints)
	require.Empty(t, got.Err)
	for _, name := range dirNames(t, got.Dir) {
		require.NotContains(t, name, checkpoint.TempMarker, "no debris")
		require.NotEqual(t, ".session.delete", name, "no marker left")
	}
	s, err = checkpoint.OpenSessionStore[paddedState](r, "full", checkpoint.ReadOnly())
	require.NoError(t, err)
	infos, err := s.List(ctx)
	require.NoError(t, err)
	for _, info := range infos {
		_, _, err := s.Load(ctx, info.Step)
		require.NoError(t, err, "step %d loads", info.Step)
	}
	require.NoError(t, s.Close())

	require.NoError(t, os.Remove(filepath.Join(dir, "filler")))
	require.NoError(t, r.Delete(ctx, "full"))
	_, err = r.Get(ctx, "full")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = r.Get(ctx, "other")
	require.NoError(t, err)
}
