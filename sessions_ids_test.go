package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// TestAnyStringIsASessionIDInADirectory makes sessions of IDs no file
// system takes as names, in a directory: each is one directory of a
// portable name (its own for an ID of earlier releases, a mapped one
// otherwise, never hidden), and the calls that take an ID, the deprecated
// OpenSession included, give the ID back as it was given. (Every backend
// runs the same through backendtest.RunSessions: see
// TestDirectoryBackendPassesTheSessionsSuite.)
func TestAnyStringIsASessionIDInADirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.NoSync())
	ids := []string{"run-7", "user:42/thread#7", "..", "a/b", `C:\x`, "CON", "nul.txt", "end.", "end ", "Ünïcode", strings.Repeat("é", 256)}
	for i, id := range ids {
		s, err := r.Create(ctx, id, nil)
		require.NoError(t, err, "%q", id)
		require.Equal(t, id, s.ID)
		require.Equal(t, filepath.Join(dir, checkpoint.SessionName(id)), s.Dir, "%q", id)
		st, err := checkpoint.OpenSession[int](r, id)
		require.NoError(t, err, "%q", id)
		_, err = st.Save(ctx, 1, i)
		require.NoError(t, err)
		require.NoError(t, st.Close())
	}
	names := dirNames(t, dir)
	require.Len(t, names, len(ids), "one directory per session, and nothing else")
	require.Contains(t, names, "run-7", "an ID of earlier releases is its own name")
	for _, name := range names {
		require.NotEqual(t, '.', name[0], "no session is hidden")
		require.LessOrEqual(t, len(name), 97)
		require.False(t, strings.HasSuffix(name, "."), name)
	}
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, sessionIDs(list))
	for _, s := range list {
		require.NoError(t, s.Err, "%q", s.ID)
		require.Equal(t, 1, s.Checkpoints, "%q", s.ID)
	}
}

// TestInvalidSessionIDErrorsNameTheCall: an ID that is no session ID is
// ErrInvalid, and the error says which call refused which ID, even one too
// long to print whole.
func TestInvalidSessionIDErrorsNameTheCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir())
	_, err := r.Create(ctx, "ab\xff", nil)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "create session")
	require.ErrorContains(t, err, `"ab\xff" is not valid UTF-8`)
	_, err = r.Get(ctx, strings.Repeat("y", checkpoint.MaxSessionIDLen+1))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "get session")
	require.ErrorContains(t, err, "1025 bytes long (at most 1024)")
	require.Less(t, len(err.Error()), 300, "a long ID is cut short in the error")
}

// TestRootsOfEarlierReleasesKeepTheirNames opens a copy of the golden root
// of sessions: its sessions keep their IDs and directories beside
// sessions of new IDs, New goes on numbering after them, and Fork of a
// new ID takes the next number.
func TestRootsOfEarlierReleasesKeepTheirNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(goldenSessionsDir)))
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3), checkpoint.NoSync())
	_, err := r.Create(ctx, "thread #1", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[goldenState](r, "thread #1")
	require.NoError(t, err)
	_, err = st.Save(ctx, 5, goldenStateAt(5))
	require.NoError(t, err)
	require.NoError(t, st.Close())

	list, err := r.List(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"001", "002", "thread #1"}, sessionIDs(list))
	for _, s := range list {
		require.NoError(t, s.Err, s.ID)
	}
	one, err := r.Get(ctx, "001")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "001"), one.Dir)
	require.Equal(t, 2, one.Checkpoints)

	f, err := r.Fork(ctx, "thread #1", 5, nil)
	require.NoError(t, err)
	require.Equal(t, "003", f.ID)
	require.Equal(t, "thread #1", f.Parent)
	n, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "004", n.ID)
	require.Equal(t, []string{"001", "002", "003", "004", checkpoint.SessionName("thread #1")}, dirNames(t, dir))
}

// A mapped session's directory renamed by hand to a name that is itself
// an ID ("foo") is a damaged session, never foo's: its session.json
// records user:1, which no earlier release could have stored there.
func TestSessionDirectoryRenamedToAnotherIDIsDamaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	s, err := r.Create(ctx, "user:1", map[string]string{"owner": "alice"})
	require.NoError(t, err)
	playSessionSteps(t, r, "user:1", 2)
	require.NoError(t, os.Rename(s.Dir, filepath.Join(dir, "foo")))
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.ErrorIs(t, list[0].Err, checkpoint.ErrCorrupt, "user:1's session under the name of foo is damaged, not foo's")
	_, err = r.Get(ctx, "foo")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
}

// TestIDsDifferingOnlyInCaseNeverShareASession: on a case-insensitive file
// system (macOS, Windows) the sessions "Run" and "run" would share one
// directory; the session.json there records "Run", so "run" finds no
// session (it is never handed "Run"'s checkpoints) and cannot be created
// over it. The test shows the directory under the other case as such a
// file system would, by renaming it.
func TestIDsDifferingOnlyInCaseNeverShareASession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	_, err := r.Create(ctx, "Run", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[string](r, "Run")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, "the checkpoint of Run")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, os.Rename(filepath.Join(dir, "Run"), filepath.Join(dir, "run")))

	_, err = checkpoint.OpenSessionStore[string](r, "run")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.Contains(t, err.Error(), `holds the session "Run"`)
	_, err = r.Create(ctx, "run", nil)
	require.ErrorIs(t, err, checkpoint.ErrExists)
}
