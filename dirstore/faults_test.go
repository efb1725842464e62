package dirstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// The fault points inside one write of the directory (create the
// temporary file, write, fsync, close, publish, fsync the directory),
// driven through a store: the directory's own test seam (SetFault), which
// package checkpoint's tests cannot reach.

// steps returns the steps of infos, in order.
func steps(infos []checkpoint.Info) []int64 {
	var out []int64
	for _, i := range infos {
		out = append(out, i.Step)
	}
	return out
}

// crashState is a state of 32 KiB or more, its padding drawn from its step.
type crashState struct {
	Step int64  `json:"step"`
	Pad  string `json:"pad"`
}

func newCrashState(step int64) crashState {
	return crashState{Step: step, Pad: strings.Repeat(strconv.FormatInt(step, 36)+"-", 16<<10)}
}

// writePoints are the points of a write where the seam can fail it.
var writePoints = []string{"create", "write", "sync", "close", "publish", "dirsync"}

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

// faultyWithSteps opens a store of the layout ("c", 3) on a new directory
// whose removals and directory fault points sw fails, once armed, and
// saves the steps 1 to last in it.
func faultyWithSteps(t *testing.T, last int64) (dir string, sw *testkit.FaultSwitch, s *checkpoint.Store[int]) {
	t.Helper()
	dir, sw = t.TempDir(), &testkit.FaultSwitch{}
	s = openFaulty[int](t, dir, sw.Fault, sw.Op, checkpoint.WithLayout("c", 3))
	saveSteps(t, s, last)
	return dir, sw, s
}

// saveSteps saves the steps 1 to last in s, each with its number as state.
func saveSteps(t *testing.T, s *checkpoint.Store[int], last int64) {
	t.Helper()
	for step := int64(1); step <= last; step++ {
		_, err := s.Save(context.Background(), step, int(step))
		require.NoError(t, err)
	}
}

// requireListedLoad fails t unless every checkpoint s lists loads, and
// returns the list.
func requireListedLoad[T any](t *testing.T, s *checkpoint.Store[T]) []checkpoint.Info {
	t.Helper()
	ctx := context.Background()
	list, err := s.List(ctx)
	require.NoError(t, err)
	for _, info := range list {
		_, _, err := s.LoadExact(ctx, info)
		require.NoError(t, err, info.Location)
	}
	return list
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
		opts []checkpoint.Option
		do   func(s *checkpoint.Store[crashState]) error
		file string // the file the write publishes
	}
	writes := []write{
		{"save", nil, func(s *checkpoint.Store[crashState]) error { _, err := s.Save(ctx, 10, newCrashState(10)); return err }, "c_010.json"},
		{"save gzip", []checkpoint.Option{checkpoint.Gzip()}, func(s *checkpoint.Store[crashState]) error { _, err := s.Save(ctx, 10, newCrashState(10)); return err }, "c_010.json.gz"},
		{"save zstd", []checkpoint.Option{checkpoint.Zstd()}, func(s *checkpoint.Store[crashState]) error { _, err := s.Save(ctx, 10, newCrashState(10)); return err }, "c_010.json.zst"},
		{"error checkpoint", nil, func(s *checkpoint.Store[crashState]) error {
			_, err := s.SaveError(ctx, 10, newCrashState(10), errors.New("boom"))
			return err
		}, "c_010.error.json"},
		{"rolling tick", nil, func(s *checkpoint.Store[crashState]) error {
			_, _, err := s.Tick(ctx, 11, newCrashState(11))
			return err
		}, "c_last.json"},
		{"side file", nil, func(s *checkpoint.Store[crashState]) error {
			return s.WriteJSON(ctx, "progress.json", map[string]int{"step": 11})
		}, "progress.json"},
	}
	cases := 0
	for _, w := range writes {
		for _, point := range points {
			t.Run(w.name+"/"+point, func(t *testing.T) {
				cases++
				dir := t.TempDir()
				sw := &testkit.FaultSwitch{}
				opts := append([]checkpoint.Option{checkpoint.WithLayout("c", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(2)}, w.opts...)
				s := openFaulty[crashState](t, dir, sw.Fault, nil, opts...)
				// The side file first: a plain store's last write is then
				// of 32 KiB or more, and the faulted one creates its
				// temporary file ahead (see dirstore's fileIO.ahead), on a
				// goroutine; a compressed one's is small, and it creates it
				// before its write function runs.
				require.NoError(t, s.WriteJSON(ctx, "progress.json", map[string]int{"step": 5}))
				for step := int64(1); step <= 5; step++ {
					_, _, err := s.Tick(ctx, step, newCrashState(step))
					require.NoError(t, err)
				}
				before := dirState(t, dir)

				sw.Arm(point)
				err := w.do(s)
				require.ErrorIs(t, err, testkit.ErrInjected)
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

				requireListedLoad(t, s)
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
			dir, sw, s := faultyWithSteps(t, 3)
			sw.Arm(point)
			err := s.Delete(ctx, 2)
			require.ErrorIs(t, err, testkit.ErrInjected)
			if point == "remove" {
				v, _, err := s.Load(ctx, 2)
				require.NoError(t, err, "still there, whole")
				require.Equal(t, 2, v)
			} else {
				require.NoFileExists(t, filepath.Join(dir, "c_002.json"))
			}
			requireListedLoad(t, s)
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
			dir, sw, s := faultyWithSteps(t, 4)
			require.NoError(t, s.Close())
			s = openFaulty[int](t, dir, sw.Fault, sw.Op, checkpoint.WithLayout("c", 3), checkpoint.KeepLast(1))
			sw.Arm(point)
			removed, err := s.Prune(ctx)
			require.ErrorIs(t, err, testkit.ErrInjected)
			list := requireListedLoad(t, s)
			if point == "remove" {
				require.Equal(t, []int64{2, 3}, steps(removed), "the first removal failed, the others went")
				require.Equal(t, []int64{1, 4}, steps(list))
			} else {
				require.Equal(t, []int64{1, 2, 3}, steps(removed))
				require.Equal(t, []int64{4}, steps(list))
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
			sw := &testkit.FaultSwitch{}
			r := openFaultySessions(t, dir, sw.Fault)
			sw.Arm(point)
			_, err := r.New(ctx, nil)
			require.ErrorIs(t, err, testkit.ErrInjected)
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
			sw := &testkit.FaultSwitch{}
			s := openFaulty[int](t, dir, sw.Fault, nil, checkpoint.WithLayout("c", 3), checkpoint.Async(2))
			_, err := s.Save(ctx, 1, 1)
			require.NoError(t, err)
			require.NoError(t, s.Flush(ctx))
			before := dirState(t, dir)
			sw.Arm(point)
			_, err = s.Save(ctx, 2, 2)
			require.NoError(t, err, "queued")
			err = s.Flush(ctx)
			require.ErrorIs(t, err, testkit.ErrInjected)
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

// TestFailedCreationRemovesItsDirectory: a creation that fails after it
// made the session's directory (here its claim cannot be written) leaves
// no directory behind, so the retry takes the same number.
func TestFailedCreationRemovesItsDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	sw := &testkit.FaultSwitch{}
	r := openFaultySessions(t, dir, sw.Fault)
	sw.Arm("write")
	_, err := r.New(ctx, nil)
	require.ErrorIs(t, err, testkit.ErrInjected)
	require.Empty(t, dirNames(t, dir))
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "001", s.ID)
	require.Equal(t, []string{sessionFile}, dirNames(t, s.Dir), "the claim goes once session.json is there")
}

// TestFailedRootSyncLeavesNoSession fails the sync of the root after a new
// session was renamed into place. The call must not report a failure for
// a session that exists: the session is taken back, and the retry makes
// exactly one session.
func TestFailedRootSyncLeavesNoSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type call struct {
		name   string
		target string // the ID the call makes
		do     func(r *checkpoint.Sessions) (checkpoint.Session, error)
	}
	for _, c := range []call{
		{"new", "002", func(r *checkpoint.Sessions) (checkpoint.Session, error) { return r.New(ctx, nil) }},
		{"create", "run-a", func(r *checkpoint.Sessions) (checkpoint.Session, error) { return r.Create(ctx, "run-a", nil) }},
		{"fork", "002", func(r *checkpoint.Sessions) (checkpoint.Session, error) { return r.Fork(ctx, "001", 1, nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var armed atomic.Bool
			fault := func(point, name string) error {
				// The root's own sync, once the session is in place.
				if _, err := os.Lstat(filepath.Join(dir, c.target)); err == nil && point == "dirsync" && name == "" && armed.CompareAndSwap(true, false) {
					return testkit.ErrInjected
				}
				return nil
			}
			r := openFaultySessions(t, dir, fault)
			src, err := r.New(ctx, nil)
			require.NoError(t, err)
			st, err := checkpoint.OpenSessionStore[int](r, src.ID)
			require.NoError(t, err)
			_, err = st.Save(ctx, 1, 1)
			require.NoError(t, err)
			require.NoError(t, st.Close())

			armed.Store(true)
			s, err := c.do(r)
			require.ErrorIs(t, err, testkit.ErrInjected)
			require.Zero(t, s)
			require.False(t, armed.Load(), "the fault was not reached")
			require.Equal(t, []string{"001"}, listIDs(t, r), "a failed call left a session")
			require.NoDirExists(t, filepath.Join(dir, c.target))

			s, err = c.do(r)
			require.NoError(t, err)
			require.Equal(t, c.target, s.ID)
			require.ElementsMatch(t, []string{"001", c.target}, listIDs(t, r), "the retry made one session")
			for _, name := range dirNames(t, dir) {
				require.False(t, strings.HasPrefix(name, stagingPrefix), name)
			}
		})
	}
}

// TestCreateThatCannotSyncTheRootLeavesNoSession fails every sync of the
// root: the new session's directory is synced into the root before
// anything of the session is made, so the call fails with nothing visible,
// and a retry makes exactly one session.
func TestCreateThatCannotSyncTheRootLeavesNoSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var failing atomic.Bool
	failing.Store(true)
	fault := func(point, name string) error {
		if failing.Load() && point == "dirsync" && name == "" {
			return testkit.ErrInjected
		}
		return nil
	}
	r := openFaultySessions(t, dir, fault)
	s, err := r.Create(ctx, "run-a", map[string]string{"k": "v"})
	require.ErrorIs(t, err, testkit.ErrInjected)
	require.Zero(t, s)
	require.Empty(t, listIDs(t, r))
	failing.Store(false)
	s, err = r.Create(ctx, "run-a", map[string]string{"k": "v"})
	require.NoError(t, err)
	require.NoError(t, s.Err)
	require.Equal(t, map[string]string{"k": "v"}, s.Meta)
	require.Equal(t, []string{"run-a"}, listIDs(t, r))
	_, err = r.Create(ctx, "run-a", nil)
	require.ErrorIs(t, err, checkpoint.ErrExists)
}
