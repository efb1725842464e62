package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// passThrough is the trivial wrapper a host writes around a backend (a
// tracer), saying what it wraps (storage.Wrapper).
type passThrough struct{ checkpoint.Backend }

func (p passThrough) Unwrap() checkpoint.Backend { return p.Backend }

// rootOpener opens the directory dir as a root of sessions with NoSync,
// and closes it when t ends.
type rootOpener func(t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Sessions

// openWrappedSessions opens dir as a root of sessions through
// OpenSessionsBackend over a pass-through wrapper of the directory's
// Backend.
func openWrappedSessions(t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Sessions {
	t.Helper()
	b, err := checkpoint.OpenDir(dir, checkpoint.NoSync())
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(passThrough{b}, append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// forEachDirectoryRoot runs test over both ways to open a directory as a
// root of sessions: OpenSessions, and OpenSessionsBackend over a wrapper of
// the directory, which behaves as the directory does.
func forEachDirectoryRoot(t *testing.T, test func(t *testing.T, open rootOpener)) {
	for _, root := range []struct {
		name string
		open rootOpener
	}{
		{"OpenSessions", openSessions},
		{"wrapped directory", openWrappedSessions},
	} {
		t.Run(root.name, func(t *testing.T) {
			t.Parallel()
			test(t, root.open)
		})
	}
}

// writeLegacyRoot writes, in dir, a root of sessions as the directory
// protocol of earlier releases left it: the root's lock file; session 001
// with two checkpoints, a stale temporary file of session.json (a SetMeta
// a crash interrupted, named without the temp marker) and its store's
// lock file; 002 forked from 001 at step 1 by a hard link; and a staging
// directory a crash left half-made, holding a checkpoint and a
// session.json.
func writeLegacyRoot(t *testing.T, dir string) (stale string) {
	t.Helper()
	ctx := context.Background()
	st, err := checkpoint.Open[int](filepath.Join(dir, "001"), checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= 2; step++ {
		_, err := st.Save(ctx, step, int(step)*10)
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	meta := func(id, extra string) []byte {
		return []byte(`{"format":1,"id":"` + id + `","created":"2026-11-21T10:00:00Z","updated":"2026-11-21T10:00:00Z"` + extra + "}\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "001", "session.json"), meta("001", ""), 0o644))
	stale = filepath.Join(dir, "001", ".session.json8274619")
	require.NoError(t, os.WriteFile(stale, []byte(`{"format":1`), 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	require.NoError(t, os.Mkdir(filepath.Join(dir, "002"), 0o755))
	require.NoError(t, os.Link(filepath.Join(dir, "001", "step_00000001.json"), filepath.Join(dir, "002", "step_00000001.json")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "002", "session.json"), meta("002", `,"parent":"001","parent_step":1`), 0o644))

	staging := filepath.Join(dir, ".staging-K3J9QZ")
	require.NoError(t, os.Mkdir(staging, 0o755))
	require.NoError(t, os.Link(filepath.Join(dir, "001", "step_00000002.json"), filepath.Join(staging, "step_00000002.json")))
	require.NoError(t, os.WriteFile(filepath.Join(staging, "session.json"), meta("003", ""), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".sessions.lock"), nil, 0o644))
	return stale
}

// TestRootWrittenByEarlierReleaseOpensAndIsCleaned opens a root written
// by the directory protocol of earlier releases: its sessions list, open
// and fork; what the protocol left (a staging directory, the root's lock
// file, a stale temporary file of session.json) is never listed and goes
// with the next New and SetMeta.
func TestRootWrittenByEarlierReleaseOpensAndIsCleaned(t *testing.T) {
	t.Parallel()
	forEachDirectoryRoot(t, func(t *testing.T, open rootOpener) {
		ctx := context.Background()
		dir := t.TempDir()
		stale := writeLegacyRoot(t, dir)
		r := open(t, dir)

		list, err := r.List(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"001", "002"}, sessionIDs(list), "the staging directory is no session")
		for _, s := range list {
			require.NoError(t, s.Err, s.ID)
		}
		fork, err := r.Get(ctx, "002")
		require.NoError(t, err)
		require.Equal(t, "001", fork.Parent)
		require.Equal(t, int64(1), fork.ParentStep)
		st, err := checkpoint.OpenSessionStore[int](r, "001")
		require.NoError(t, err)
		v, info, err := st.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, 20, v)
		require.Equal(t, int64(2), info.Step)
		require.NoError(t, st.Close())

		s, err := r.New(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, "003", s.ID, "the staging directory's session.json never took an ID")
		require.NoError(t, s.Err)
		require.Zero(t, s.Checkpoints)
		for _, name := range dirNames(t, dir) {
			require.False(t, strings.HasPrefix(name, ".staging-"), "New removes the staging directory: %s", name)
			require.NotEqual(t, ".sessions.lock", name, "New removes the root's old lock file")
		}
		require.FileExists(t, stale, "a temporary file of session.json is SetMeta's to remove")
		require.NoError(t, r.SetMeta(ctx, "001", map[string]string{"k": "v"}))
		require.NoFileExists(t, stale)

		f, err := r.Fork(ctx, "002", 1, nil)
		require.NoError(t, err)
		require.Equal(t, "004", f.ID)
		require.Equal(t, 1, f.Checkpoints)
		require.ElementsMatch(t, []string{"001", "002", "003", "004"}, listedIDs(t, r))
	})
}

// TestGoldenRootOfEarlierReleaseOpens opens a copy of a root that the
// directory protocol of earlier releases wrote (the command line's test
// fixture: a root lock file, a staging directory, and a directory with a
// checkpoint but no session.json): its sessions list, the one without
// session.json as damaged, and RemoveStaging removes the protocol's
// leftovers and nothing else.
func TestGoldenRootOfEarlierReleaseOpens(t *testing.T) {
	t.Parallel()
	forEachDirectoryRoot(t, func(t *testing.T, open rootOpener) {
		ctx := context.Background()
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("internal", "cli", "testdata", "campaign"))))
		r := open(t, dir, checkpoint.WithLayout("turn", 3))
		list, err := r.List(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"003", "002", "001"}, sessionIDs(list))
		require.ErrorIs(t, list[0].Err, checkpoint.ErrCorrupt, "003 has no session.json: damaged, never hidden")
		require.Equal(t, 1, list[0].Checkpoints)
		require.NoError(t, list[1].Err)
		require.NoError(t, list[2].Err)

		removed, err := r.RemoveStaging(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{filepath.Join(dir, ".staging-QX7PZ2")}, removed)
		require.Equal(t, []string{"001", "002", "003"}, dirNames(t, dir))
		after, err := r.List(ctx)
		require.NoError(t, err)
		require.Equal(t, list, after, "no session was touched")
	})
}

// TestHalfMadeSessionIsInvisibleAndCleanedUp: a staging directory that the
// directory protocol of earlier releases left in the middle of a New or a
// Fork is never listed, and the next New removes it.
func TestHalfMadeSessionIsInvisibleAndCleanedUp(t *testing.T) {
	t.Parallel()
	forEachDirectoryRoot(t, func(t *testing.T, open rootOpener) {
		ctx := context.Background()
		dir := t.TempDir()
		r := open(t, dir)
		// What a crash in the middle of New or Fork leaves behind.
		staging := filepath.Join(dir, ".staging-ABC")
		require.NoError(t, os.MkdirAll(staging, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(staging, "step_00000001.json"), []byte("{"), 0o644))

		list, err := r.List(ctx)
		require.NoError(t, err)
		require.Empty(t, list)
		s, err := r.New(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, "001", s.ID)
		require.NoDirExists(t, staging)
	})
}

// TestRemoveStagingReportsALegacyStagingDirectoryOnce: in a root that the
// directory protocol of earlier releases left with its lock file and a
// staging directory, RemoveStaging removes the staging directory and
// reports it once.
func TestRemoveStagingReportsALegacyStagingDirectoryOnce(t *testing.T) {
	t.Parallel()
	forEachDirectoryRoot(t, func(t *testing.T, open rootOpener) {
		ctx := context.Background()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".sessions.lock"), nil, 0o644))
		require.NoError(t, os.Mkdir(filepath.Join(dir, ".staging-K3J9QZ"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".staging-K3J9QZ", "step_00000001.json"), []byte("x"), 0o644))
		r := open(t, dir)
		first, err := r.RemoveStaging(ctx)
		require.NoError(t, err)
		second, err := r.RemoveStaging(ctx)
		require.NoError(t, err)
		_, err = os.Lstat(filepath.Join(dir, ".staging-K3J9QZ"))
		require.ErrorIs(t, err, os.ErrNotExist, "the staging directory stays (RemoveStaging said %v, then %v)", first, second)
		require.Empty(t, second, "RemoveStaging reports the same staging directory removed again")
	})
}

// TestOddStagingDirectoryDoesNotBlockNew: a directory named like an
// earlier release's staging directory but holding a subdirectory (put
// there by hand, or by another tool) does not make New fail.
func TestOddStagingDirectoryDoesNotBlockNew(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, unixOnly)
	forEachDirectoryRoot(t, func(t *testing.T, open rootOpener) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, ".staging-tool", "cache"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".staging-tool", "cache", "x"), nil, 0o644))
		r := open(t, dir)
		_, err := r.New(context.Background(), nil)
		require.NoError(t, err, "an odd staging directory makes New fail")
	})
}

// TestLegacyStagingRemovalStaysInTheRoot: a staging directory of an
// earlier release is removed whole, its subdirectories too, and a
// symbolic link in it is removed, never followed; one nested deeper than
// any release made is left, and named by RemoveStaging's error, but never
// blocks New.
func TestLegacyStagingRemovalStaysInTheRoot(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, unixOnly)
	forEachDirectoryRoot(t, func(t *testing.T, open rootOpener) {
		ctx := context.Background()
		base := t.TempDir()
		dir := filepath.Join(base, "root")
		require.NoError(t, os.MkdirAll(filepath.Join(base, "outside"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(base, "outside", "keep"), nil, 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, ".staging-a", "sub", "subsub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".staging-a", "sub", "subsub", "x"), nil, 0o644))
		require.NoError(t, os.Symlink(filepath.Join(base, "outside"), filepath.Join(dir, ".staging-a", "out")))
		require.NoError(t, os.Symlink(filepath.Join(base, "outside"), filepath.Join(dir, ".staging-a", "sub", "out")))
		deep := filepath.Join(dir, ".staging-deep")
		for range 12 {
			deep = filepath.Join(deep, "d")
		}
		require.NoError(t, os.MkdirAll(deep, 0o755))
		r := open(t, dir)
		s, err := r.New(ctx, nil)
		require.NoError(t, err, "a staging directory that cannot be removed blocks New")
		require.Equal(t, "001", s.ID)
		require.NoDirExists(t, filepath.Join(dir, ".staging-a"))
		require.FileExists(t, filepath.Join(base, "outside", "keep"), "the removal followed a symbolic link out of the root")
		removed, err := r.RemoveStaging(ctx)
		require.ErrorContains(t, err, filepath.Join(dir, ".staging-deep"))
		require.Empty(t, removed, "RemoveStaging reports a directory it did not remove")
		require.DirExists(t, filepath.Join(dir, ".staging-deep"))
	})
}

func TestRemoveStagingRemovesStagingDirectoriesAndTheOldLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	staging := filepath.Join(dir, checkpoint.StagingPrefix+"ABC")
	require.NoError(t, os.MkdirAll(staging, 0o755))
	touch(t, staging, "step_00000001.json")

	ro := openSessions(t, dir, checkpoint.ReadOnly())
	_, err = ro.RemoveStaging(ctx)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)

	// The lock file of the directory protocol of Sessions goes with its
	// staging directories: Sessions takes no lock on the root.
	touch(t, dir, checkpoint.SessionsLockName)

	removed, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{staging}, removed)
	require.NoDirExists(t, staging)
	require.NoFileExists(t, filepath.Join(dir, checkpoint.SessionsLockName))
	require.DirExists(t, s.Dir, "sessions are not staging")

	removed, err = r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
}
