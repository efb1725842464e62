package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// `checkpoint sessions rm ROOT ID` of a session a writer holds names the
// session's directory in its error (as TestSessionsRmOfASessionAWriterHoldsIsLocked
// checks for ID 001). For an any-string ID (issue 23) it builds the path
// by hand, joinName(t.dir, id) in sessionsRm (internal/cli/sessions.go),
// instead of the session's stored (mapped) name, so:
//   - the error names a directory that does not exist ("ROOT/user:42/thread#7"),
//     or, for an ID such as "../../etc", one outside the root;
//   - an ID holding a newline is printed raw by printableLines, splitting
//     the error into two lines, the second of which the ID's author
//     chooses (quote.go promises escaped, one-line output of IDs).
func TestSessionsRmOfAHeldAnyStringIDNamesItsDirectoryOnOneLine(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"user:42/thread#7", "a\ncheckpoint sessions: removed 001", "../../etc"} {
		dir := t.TempDir()
		root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
		require.NoError(t, err)
		s, err := root.Create(context.Background(), id, nil)
		require.NoError(t, err)
		st, err := checkpoint.OpenSessionStore[int](root, id)
		require.NoError(t, err)

		r := runCLI(t, "sessions", "rm", dir, id)
		require.Equal(t, exitLocked, r.code, r.stderr)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		require.Contains(t, r.stderr, s.Dir+" is open by a running writer", "names the session's directory")
		require.NoError(t, st.Close())
		require.NoError(t, root.Close())
	}
}

// The README: PruneIdle skips damaged sessions, "which it cannot date:
// Delete removes those when asked", and `sessions ls` lists a damaged
// session of an any-string ID whose session.json is missing under its
// directory's name, "(user_7-<hash>)", since its ID is unknown
// (sessionLabel). Nothing the command offers removes it: `sessions rm ROOT
// user_7-<hash>` takes the name for an ID, maps it again
// (names.SessionName) and fails with ErrNotFound, and prune skips it; the
// user is left with rm -rf beside a root that writers share.
func TestSessionsRmRemovesADamagedSessionListedByItsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	s, err := root.Create(context.Background(), "user:7", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](root, "user:7")
	require.NoError(t, err)
	_, err = st.Save(context.Background(), 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, root.Close())
	require.NoError(t, os.Remove(filepath.Join(s.Dir, "session.json")))
	name := filepath.Base(s.Dir)

	r := runCLI(t, "sessions", "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "("+name+")", "listed by its directory's name")

	r = runCLI(t, "sessions", "rm", dir, name)
	require.Equal(t, 0, r.code, "the damaged session the listing shows can be removed: %s", r.stderr)
	require.NoDirExists(t, s.Dir)
}
