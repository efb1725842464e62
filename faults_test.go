package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gocheckpoint/checkpoint/backendtest/inject"
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
		opts := []Option{WithLayout("c", 3)}
		if gz {
			opts = append(opts, Gzip())
		}
		s := openDurableStore[crashState](t, sub, opts...)
		var full error
		var saved []int64
		for step := int64(1); step <= 200 && full == nil; step++ {
			// Incompressible enough that gzip fills the disk too.
			st := crashState{Step: step, Pad: randomText(step, 96<<10)}
			if _, err := s.Save(ctx, step, st); err != nil {
				full = err
				break
			}
			saved = append(saved, step)
		}
		require.Error(t, full, "gzip=%v: the disk never filled", gz)
		require.ErrorIs(t, full, syscall.ENOSPC, "gzip=%v", gz)
		var e *Error
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
		require.ErrorIs(t, err, ErrNotFound, "no partial checkpoint of the failed step")
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
		_, err = s.Save(ctx, next, crashState{Step: next, Pad: randomText(next, 96<<10)})
		require.NoError(t, err, "gzip=%v: saving after space was freed", gz)
		got, _, err = s.Load(ctx, next)
		require.NoError(t, err)
		require.Equal(t, next, got.Step)
		require.NoError(t, s.Close())
		require.NoError(t, os.RemoveAll(sub))
	}
}

func TestDiskFullFailsSavesRollingAndSideWritesCleanly(t *testing.T) {
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
			dir := tinyDisk(t, "size=1m")
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
func TestOutOfInodesFailsSavesCleanly(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := tinyDisk(t, "size=8m,nr_inodes=8")
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
func TestSavesFailingOnAFullDiskLeakNothing(t *testing.T) {
	skipUnlessLinux(t)
	ctx := context.Background()
	dir := tinyDisk(t, "size=256k")
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

// randomText returns n bytes of text that gzip cannot shrink much.
func randomText(seed int64, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	b := make([]byte, n)
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x&63]
	}
	return string(b)
}

// TestPermissionDeniedIsAnErrorNeverDamage runs as an unprivileged user (root ignores file
// modes): a read-only directory refuses saves with a clear error and keeps
// its checkpoints loadable; an unreadable checkpoint is a permission error,
// not corruption, and is never moved aside.
func TestPermissionDeniedIsAnErrorNeverDamage(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, "file modes do not restrict access (Chmod sets only the read-only attribute)")
	if os.Geteuid() == 0 {
		rerunAsNobody(t)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("c", 3))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}

	// A directory that has become read-only.
	require.NoError(t, os.Chmod(dir, 0o555))
	_, err := s.Save(ctx, 4, 4)
	require.ErrorIs(t, err, fs.ErrPermission)
	var e *Error
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
	_, err = Open[int](locked)
	require.ErrorIs(t, err, fs.ErrPermission)
	require.Contains(t, err.Error(), locked)
	r := openStore[int](t, dir, WithLayout("c", 3), ReadOnly())

	// An unreadable checkpoint.
	newest := filepath.Join(dir, "c_003.json")
	require.NoError(t, os.Chmod(newest, 0))
	_, _, err = r.Load(ctx, 3)
	require.ErrorIs(t, err, fs.ErrPermission)
	require.False(t, errors.Is(err, ErrCorrupt), "a permission problem is not damage")
	require.Contains(t, err.Error(), newest)
	var skipped []error
	s = openStore[int](t, dir, WithLayout("c", 3), WithHooks(Hooks{OnError: func(err error) { skipped = append(skipped, err) }}))
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

// rerunAsNobody runs the calling test in a copy of the test binary as uid
// and gid 65534, and fails if it does not pass there.
func rerunAsNobody(t *testing.T) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	// t.TempDir's parent is private to its creator: open the path to nobody.
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o777))
	bin := filepath.Join(dir, "test.bin")
	src, err := os.Open(exe)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o777))
	require.NoError(t, os.Chmod(tmp, 0o777))

	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp, "GOCOVERDIR=")
	runAs(t, cmd, 65534, 65534)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "as nobody:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "as nobody:\n%s", out)
}

var errInjected = errors.New("injected fault")

// faultSwitch fails the next Backend operation at one point, once armed.
type faultSwitch struct {
	mu    sync.Mutex
	point string
	hits  int
}

func (f *faultSwitch) arm(point string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.point, f.hits = point, 0
}

// op fails a Remove of the wrapped backend (see inject.Wrap) as the point
// "remove", once armed: a removal is a Backend operation.
func (f *faultSwitch) op(o inject.Op) error {
	if o.Kind != inject.Remove {
		return nil
	}
	return f.fault("remove", o.Name)
}

func (f *faultSwitch) fault(point, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.point != point || f.hits > 0 {
		return nil
	}
	f.hits++
	return fmt.Errorf("%s %s: %w", point, name, errInjected)
}

// openInjected opens a store on the directory dir wrapped in inject.Wrap
// with opFault: faults of whole Backend operations. The fault points
// inside one write of the directory are package dirstore's own tests.
func openInjected[T any](t *testing.T, dir string, opFault func(inject.Op) error, opts ...Option) *Store[T] {
	t.Helper()
	cfg, err := newConfig(opts)
	require.NoError(t, err)
	d, err := openDir(dir, cfg)
	require.NoError(t, err)
	s, err := OpenBackend[T](inject.Wrap(d, opFault), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}
