package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeLegacyRoot writes, in dir, a root of sessions as the directory
// protocol of earlier releases left it: the root's lock file; session 001
// with two checkpoints, a stale temporary file of session.json (a SetMeta
// a crash interrupted, named as before the temp marker) and its store's
// lock file; 002 forked from 001 at step 1 by a hard link; and a staging
// directory a crash left half-made, holding a checkpoint and a
// session.json.
func writeLegacyRoot(t *testing.T, dir string) (stale string) {
	t.Helper()
	ctx := context.Background()
	st, err := Open[int](filepath.Join(dir, "001"), NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= 2; step++ {
		_, err := st.Save(ctx, step, int(step)*10)
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	meta := func(id, extra string) []byte {
		return []byte(`{"format":1,"id":"` + id + `","created":"2026-11-21T10:00:00Z","updated":"2026-11-21T10:00:00Z"` + extra + "}\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "001", sessionFile), meta("001", ""), 0o644))
	stale = filepath.Join(dir, "001", "."+sessionFile+"8274619")
	require.NoError(t, os.WriteFile(stale, []byte(`{"format":1`), 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	require.NoError(t, os.Mkdir(filepath.Join(dir, "002"), 0o755))
	require.NoError(t, os.Link(filepath.Join(dir, "001", "step_00000001.json"), filepath.Join(dir, "002", "step_00000001.json")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "002", sessionFile), meta("002", `,"parent":"001","parent_step":1`), 0o644))

	staging := filepath.Join(dir, stagingPrefix+"K3J9QZ")
	require.NoError(t, os.Mkdir(staging, 0o755))
	require.NoError(t, os.Link(filepath.Join(dir, "001", "step_00000002.json"), filepath.Join(staging, "step_00000002.json")))
	require.NoError(t, os.WriteFile(filepath.Join(staging, sessionFile), meta("003", ""), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, sessionsLockName), nil, 0o644))
	return stale
}

// TestRootWrittenByEarlierReleaseOpensAndIsCleaned opens a root written
// by the directory protocol of earlier releases: its sessions list, open
// and fork as before; what the protocol left (a staging directory, the
// root's lock file, a stale temporary file of session.json) is never
// listed and goes with the next New and SetMeta.
func TestRootWrittenByEarlierReleaseOpensAndIsCleaned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	stale := writeLegacyRoot(t, dir)
	r := openSessions(t, dir)

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
	st, err := OpenSession[int](r, "001")
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
		require.False(t, strings.HasPrefix(name, stagingPrefix), "New removes the staging directory: %s", name)
		require.NotEqual(t, sessionsLockName, name, "New removes the root's old lock file")
	}
	require.FileExists(t, stale, "a temporary file of session.json is SetMeta's to remove")
	require.NoError(t, r.SetMeta(ctx, "001", map[string]string{"k": "v"}))
	require.NoFileExists(t, stale)

	f, err := r.Fork(ctx, "002", 1, nil)
	require.NoError(t, err)
	require.Equal(t, "004", f.ID)
	require.Equal(t, 1, f.Checkpoints)
	require.ElementsMatch(t, []string{"001", "002", "003", "004"}, listIDs(t, r))
}

// TestGoldenRootOfEarlierReleaseOpens opens a copy of a root that the
// directory protocol of earlier releases wrote (the command line's test
// fixture: a root lock file, a staging directory, and a directory with a
// checkpoint but no session.json): it lists as it always did, and
// RemoveStaging removes the protocol's leftovers and nothing else.
func TestGoldenRootOfEarlierReleaseOpens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("internal", "cli", "testdata", "campaign"))))
	r := openSessions(t, dir, WithLayout("turn", 3))
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"003", "002", "001"}, sessionIDs(list))
	require.ErrorIs(t, list[0].Err, ErrCorrupt, "003 has no session.json: damaged, never hidden")
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
}

// TestEmptyDirectoryIsNoSession: a directory that holds nothing, or only
// hidden files (what a creation a crash interrupted leaves before its
// claim is published), is no session: not listed, not found; New numbers
// past it.
func TestEmptyDirectoryIsNoSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "001"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "002"), 0o755))
	touch(t, filepath.Join(dir, "002"), tempName(claimName))
	require.Empty(t, listIDs(t, r))
	for _, id := range []string{"001", "002"} {
		_, err := r.Get(ctx, id)
		require.ErrorIs(t, err, ErrNotFound, id)
		_, err = OpenSession[int](r, id)
		require.ErrorIs(t, err, ErrNotFound, id)
	}
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "003", s.ID)
}
