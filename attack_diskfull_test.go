package checkpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Attack: a real full disk under the descriptor-based writer, with states
// that fit its 64 KiB buffer (the bytes reach the file only at Sync, or at
// Close with NoSync) and states that pass through it; the rolling file and a
// side file on the full disk; a disk out of inodes.

func attackTinyDisk(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// checkNoDebris: no temporary file, and every checkpoint name loads.
func checkNoDebris[T any](t *testing.T, s *Store[T], dir, what string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range dirNames(t, dir) {
		require.False(t, strings.Contains(name, tempMarker), "%s: temporary file %s left", what, name)
		if _, ok := s.cfg.layout.parse(name); ok {
			f, err := os.Open(filepath.Join(dir, name))
			require.NoError(t, err)
			_, err = readEnvelope(f, DefaultMaxReadSize)
			f.Close()
			require.NoError(t, err, "%s: %s is partial", what, name)
		}
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	for _, info := range list {
		_, _, err := s.LoadInfo(ctx, info)
		require.NoError(t, err, "%s: %s", what, info.Path)
	}
}

func TestAttackDiskFullFdWriter(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	cases := []struct {
		name string
		size int // state padding
		opts []Option
	}{
		{"plain-small", 40 << 10, nil},
		{"plain-small-nosync", 40 << 10, []Option{NoSync()}},
		{"plain-at-buffer", fdTempBuffer - 120, nil},
		{"plain-large", 150 << 10, nil},
		{"gzip-small", 40 << 10, []Option{Gzip()}},
		{"zstd-small", 40 << 10, []Option{Zstd()}},
		{"zstd-large-nosync", 150 << 10, []Option{Zstd(), NoSync()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := attackTinyDisk(t, "size=1m")
			opts := append([]Option{WithLayout("c", 3), WithRolling(), Every(1000)}, c.opts...)
			s, err := Open[crashState](dir, opts...)
			require.NoError(t, err)
			defer s.Close()
			st := func(step int64) crashState { return crashState{Step: step, Pad: randomText(step, c.size)} }

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
			var e *Error
			require.ErrorAs(t, full, &e)
			require.Equal(t, last+1, e.Step)
			require.Contains(t, e.Path, dir)
			checkNoDebris(t, s, dir, "after the failed save")
			_, _, err = s.Load(ctx, last+1)
			require.ErrorIs(t, err, ErrNotFound)

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
			var side crashState
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

// A tmpfs out of inodes: the temporary file cannot be created at all.
func TestAttackOutOfInodes(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := attackTinyDisk(t, "size=8m,nr_inodes=8")
	s, err := Open[int](dir, WithLayout("c", 3))
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
	require.False(t, errors.Is(full, ErrCorrupt))
}

// Saves failing on a full disk, over and over, leak no descriptor and no
// temporary file; the longest names a layout or a side file can have fit.
func TestAttackFailingSavesLeakNothing(t *testing.T) {
	skipUnlessLinux(t)
	ctx := context.Background()
	dir := attackTinyDisk(t, "size=256k")
	prefix := strings.Repeat("p", 64)
	s, err := Open[crashState](dir, WithLayout(prefix, 19), Gzip())
	require.NoError(t, err)
	defer s.Close()
	side := strings.Repeat("s", 195) + ".json"
	require.NoError(t, s.WriteJSON(ctx, side, 1))
	_, err = s.SaveError(ctx, 1, crashState{Step: 1}, errors.New("x"))
	require.NoError(t, err)
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	step := int64(2)
	for ; step < 100; step++ {
		if _, err := s.Save(ctx, step, crashState{Step: step, Pad: randomText(step, 100<<10)}); err != nil {
			break
		}
	}
	before := fds()
	for i := 0; i < 30; i++ {
		_, err := s.Save(ctx, step, crashState{Step: step, Pad: randomText(step, 100<<10)})
		require.ErrorIs(t, err, syscall.ENOSPC)
		_, _, err = s.Tick(ctx, step, crashState{Step: step, Pad: randomText(step, 100<<10)})
		require.Error(t, err)
	}
	require.LessOrEqual(t, fds(), before+2, "descriptors leaked by failing saves")
	checkNoDebris(t, s, dir, "after 60 failing writes")
}
