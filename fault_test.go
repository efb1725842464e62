package checkpoint

import (
	"context"
	"errors"
	"fmt"
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

// tinyDisk mounts a 1 MiB tmpfs on a fresh directory and returns it; the
// test is skipped where mounting is not permitted (not root, a container
// without the capability).
func tinyDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tiny tmpfs here (%v: %s); the disk-full test needs root", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestDiskFullFailsCleanly fills a real filesystem. The save that does not
// fit fails with an error wrapping ENOSPC that names the file, leaves no
// partial checkpoint or temporary file, the earlier checkpoints still load,
// and once space is freed saving works again.
func TestDiskFullFailsCleanly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := tinyDisk(t)
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

// TestPermissionDenied runs as an unprivileged user (root ignores file
// modes): a read-only directory refuses saves with a clear error and keeps
// its checkpoints loadable; an unreadable checkpoint is a permission error,
// not corruption, and is never moved aside.
func TestPermissionDenied(t *testing.T) {
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
