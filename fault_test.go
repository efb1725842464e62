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

// writePoints are the points of a write where the seam can fail it.
var writePoints = []string{"create", "write", "sync", "close", "publish", "dirsync"}

// faultSwitch fails the next file operation at one point, once armed.
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

// openFaulty opens a store on the directory dir whose own fault points
// (see fileIO.fault) fail where dirFault says, wrapped, unless opFault is
// nil, in inject.Wrap with opFault: the directory's test seam for faults
// inside one write, the wrapper for faults of whole Backend operations.
func openFaulty[T any](t *testing.T, dir string, dirFault func(point, name string) error, opFault func(inject.Op) error, opts ...Option) *Store[T] {
	t.Helper()
	cfg, err := newConfig(opts)
	require.NoError(t, err)
	d, err := openDirBackend(dir, cfg.readOnly, cfg.noSync)
	require.NoError(t, err)
	d.fault = dirFault
	var b Backend = d
	if opFault != nil {
		b = inject.Wrap(d, opFault)
	}
	s, err := OpenBackend[T](b, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
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

// dirState is every file of a directory but the lock, with its bytes.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range dirNames(t, dir) {
		if name == lockName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		out[name] = string(b)
	}
	return out
}

// TestFaultAtEveryPointOfAWrite makes each step of each kind of write fail
// in turn (create the temporary file, write, fsync, close, publish, fsync
// the directory) and proves that the store then holds the old set of files
// or the new set, byte for byte, never a temporary file or a torn one; that
// the error names the file and wraps the failure; and that the same write
// then succeeds.
func TestFaultAtEveryPointOfAWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	points := writePoints
	type write struct {
		name string
		opts []Option
		do   func(s *Store[crashState]) error
		file string // the file the write publishes
	}
	writes := []write{
		{"save", nil, func(s *Store[crashState]) error { _, err := s.Save(ctx, 10, newCrashState(10)); return err }, "c_010.json"},
		{"save gzip", []Option{Gzip()}, func(s *Store[crashState]) error { _, err := s.Save(ctx, 10, newCrashState(10)); return err }, "c_010.json.gz"},
		{"save zstd", []Option{Zstd()}, func(s *Store[crashState]) error { _, err := s.Save(ctx, 10, newCrashState(10)); return err }, "c_010.json.zst"},
		{"error checkpoint", nil, func(s *Store[crashState]) error {
			_, err := s.SaveError(ctx, 10, newCrashState(10), errors.New("boom"))
			return err
		}, "c_010.error.json"},
		{"rolling tick", nil, func(s *Store[crashState]) error { _, _, err := s.Tick(ctx, 11, newCrashState(11)); return err }, "c_last.json"},
		{"side file", nil, func(s *Store[crashState]) error { return s.WriteJSON(ctx, "progress.json", map[string]int{"step": 11}) }, "progress.json"},
	}
	cases := 0
	for _, w := range writes {
		for _, point := range points {
			t.Run(w.name+"/"+point, func(t *testing.T) {
				cases++
				dir := t.TempDir()
				sw := &faultSwitch{}
				opts := append([]Option{WithLayout("c", 3), WithRolling(), Every(2)}, w.opts...)
				s := openFaulty[crashState](t, dir, sw.fault, nil, opts...)
				for step := int64(1); step <= 5; step++ {
					_, _, err := s.Tick(ctx, step, newCrashState(step))
					require.NoError(t, err)
				}
				require.NoError(t, s.WriteJSON(ctx, "progress.json", map[string]int{"step": 5}))
				before := dirState(t, dir)

				sw.arm(point)
				err := w.do(s)
				require.ErrorIs(t, err, errInjected)
				require.ErrorContains(t, err, filepath.Join(dir, w.file))
				after := dirState(t, dir)
				newSet := false
				if w.file == "c_last.json" || w.file == "progress.json" {
					// A file replaced by rename cannot be put back once the
					// directory sync fails: the new file is there, whole.
					newSet = point == "dirsync"
				}
				if newSet {
					require.NotEqual(t, before[w.file], after[w.file])
					delete(before, w.file)
					delete(after, w.file)
				}
				require.Equal(t, before, after, "the old set of files, byte for byte")

				list, err := s.List(ctx)
				require.NoError(t, err)
				for _, info := range list {
					_, _, err := s.LoadInfo(ctx, info)
					require.NoError(t, err, info.Path)
				}
				require.NoError(t, w.do(s), "the same write works once the fault is gone")
				require.FileExists(t, filepath.Join(dir, w.file))
				for _, name := range dirNames(t, dir) {
					require.False(t, strings.HasPrefix(name, ".") && name != lockName, "leftover %s", name)
				}
			})
		}
	}
	t.Logf("%d fault points tried (%d write kinds x %d points): old set or new set every time", cases, len(writes), len(points))
}

// TestFaultWhileRemoving makes a removal and the directory sync after it
// fail: the file is either still there, whole, or gone, and the error says
// which file.
func TestFaultWhileRemoving(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, point := range []string{"remove", "dirsync"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			sw := &faultSwitch{}
			s := openFaulty[int](t, dir, sw.fault, sw.op, WithLayout("c", 3))
			for step := int64(1); step <= 3; step++ {
				_, err := s.Save(ctx, step, int(step))
				require.NoError(t, err)
			}
			sw.arm(point)
			err := s.Delete(ctx, 2)
			require.ErrorIs(t, err, errInjected)
			if point == "remove" {
				v, _, err := s.Load(ctx, 2)
				require.NoError(t, err, "still there, whole")
				require.Equal(t, 2, v)
			} else {
				require.NoFileExists(t, filepath.Join(dir, "c_002.json"))
			}
			list, err := s.List(ctx)
			require.NoError(t, err)
			for _, info := range list {
				_, _, err := s.LoadInfo(ctx, info)
				require.NoError(t, err)
			}
		})
	}
}

// TestFaultWhilePruning: a removal that fails leaves its file whole and the
// others go; a failed directory sync is reported. Either way every file
// left loads, and Prune says what it removed.
func TestFaultWhilePruning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, point := range []string{"remove", "dirsync"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			sw := &faultSwitch{}
			s := openFaulty[int](t, dir, sw.fault, sw.op, WithLayout("c", 3))
			for step := int64(1); step <= 4; step++ {
				_, err := s.Save(ctx, step, int(step))
				require.NoError(t, err)
			}
			require.NoError(t, s.Close())
			s = openFaulty[int](t, dir, sw.fault, sw.op, WithLayout("c", 3), KeepLast(1))
			sw.arm(point)
			removed, err := s.Prune(ctx)
			require.ErrorIs(t, err, errInjected)
			list, err := s.List(ctx)
			require.NoError(t, err)
			if point == "remove" {
				require.Equal(t, []int64{2, 3}, steps(removed), "the first removal failed, the others went")
				require.Equal(t, []int64{1, 4}, steps(list))
			} else {
				require.Equal(t, []int64{1, 2, 3}, steps(removed))
				require.Equal(t, []int64{4}, steps(list))
			}
			for _, info := range list {
				_, _, err := s.LoadInfo(ctx, info)
				require.NoError(t, err)
			}
		})
	}
}

// TestFaultWhileCreatingASession fails each point of making a session
// (writing session.json, syncing the directories): no session appears,
// nothing half-made is listed, and the next New works and cleans up.
func TestFaultWhileCreatingASession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, point := range writePoints {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			sw := &faultSwitch{}
			r := openDurableSessions(t, dir)
			r.b.(*dirBackend).fault = sw.fault // the directory's fault points; its children share them
			sw.arm(point)
			_, err := r.New(ctx, nil)
			require.ErrorIs(t, err, errInjected)
			list, err := r.List(ctx)
			require.NoError(t, err)
			require.Empty(t, list, "the failure came while the session was assembled out of sight")
			s, err := r.New(ctx, nil)
			require.NoError(t, err)
			require.NoError(t, s.Err)
			for _, name := range dirNames(t, dir) {
				require.False(t, strings.HasPrefix(name, stagingPrefix), name)
			}
		})
	}
}

// TestFaultInAnAsyncSave fails each point of a background save: the
// failure comes back from Flush, the directory holds the old set, and the
// same save then works.
func TestFaultInAnAsyncSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, point := range writePoints {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			sw := &faultSwitch{}
			s := openFaulty[int](t, dir, sw.fault, nil, WithLayout("c", 3), Async(2))
			_, err := s.Save(ctx, 1, 1)
			require.NoError(t, err)
			require.NoError(t, s.Flush(ctx))
			before := dirState(t, dir)
			sw.arm(point)
			_, err = s.Save(ctx, 2, 2)
			require.NoError(t, err, "queued")
			err = s.Flush(ctx)
			require.ErrorIs(t, err, errInjected)
			require.ErrorContains(t, err, filepath.Join(dir, "c_002.json"))
			require.Equal(t, before, dirState(t, dir))
			_, err = s.Save(ctx, 2, 2)
			require.NoError(t, err)
			require.NoError(t, s.Flush(ctx))
			v, _, err := s.Load(ctx, 2)
			require.NoError(t, err)
			require.Equal(t, 2, v)
		})
	}
}
