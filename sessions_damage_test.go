package checkpoint_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// unixOnly says why a test of odd entries skips on Windows: it is proven on
// unix file systems only.
const unixOnly = "proven on unix file systems only"

// TestDamagedSessionIsReportedNeverHidden: a session whose session.json is
// unreadable, or missing beside a checkpoint, is damaged: opening it is
// ErrCorrupt naming the file, List lists it with its error, and
// ResumeSession reports it when it is the most recent; a missing ID, a
// file or a symbolic link is ErrNotFound.
func TestDamagedSessionIsReportedNeverHidden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	good, err := r.New(ctx, nil)
	require.NoError(t, err)
	bad, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bad.Dir, "session.json"), []byte(`{"format":1,"created":`), 0o644))
	// No session.json at all, and a checkpoint: a damaged session. (An
	// empty directory is none: see TestEmptyDirectoryIsNoSession.)
	st, err := checkpoint.Open[int](filepath.Join(dir, "003"))
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644))
	if canSymlink(t) {
		require.NoError(t, os.Symlink(good.Dir, filepath.Join(dir, "link")))
	}

	_, err = checkpoint.OpenSessionStore[int](r, "999")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = r.Get(ctx, "999")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = checkpoint.OpenSessionStore[int](r, bad.ID)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, filepath.Join(bad.Dir, "session.json"))
	_, err = checkpoint.OpenSessionStore[int](r, "003")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	_, err = checkpoint.OpenSessionStore[int](r, "link")
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "a symbolic link is not a session")
	_, err = checkpoint.OpenSessionStore[int](r, "notes.txt")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)

	list, err := r.List(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{good.ID, bad.ID, "003"}, sessionIDs(list), "damage hides no session")
	for _, s := range list {
		if s.ID == good.ID {
			require.NoError(t, s.Err)
		} else {
			require.ErrorIs(t, s.Err, checkpoint.ErrCorrupt, s.ID)
		}
	}

	// A damaged most recent session is reported by ResumeSession; the
	// caller can start a fresh one.
	_, got, err := checkpoint.ResumeLatestSession[int](ctx, r)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Equal(t, "003", got.ID)
	require.Equal(t, 1, got.Checkpoints, "what can be read of a damaged session is filled in")
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "004", s.ID)
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
	require.NoError(t, os.WriteFile(filepath.Join(dir, "002", checkpoint.TempName(".session.claim")), []byte("x"), 0o644))
	require.Empty(t, listedIDs(t, r))
	for _, id := range []string{"001", "002"} {
		_, err := r.Get(ctx, id)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, id)
		_, err = checkpoint.OpenSessionStore[int](r, id)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, id)
	}
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "003", s.ID)
}

// TestSessionLinkedOutsideTheRootIsNeverReached: a symbolic link at a
// session's name, to a directory outside the root, takes its ID but is no
// session: opening it and SetMeta are ErrNotFound, and nothing is written
// outside.
func TestSessionLinkedOutsideTheRootIsNeverReached(t *testing.T) {
	t.Parallel()
	requireSymlinks(t)
	ctx := context.Background()
	parent := t.TempDir()
	outside := filepath.Join(parent, "outside")
	require.NoError(t, os.Mkdir(outside, 0o755))
	dir := filepath.Join(parent, "root")
	r := openSessions(t, dir)
	// A session directory replaced by a link to a directory outside.
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "001")))
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "002", s.ID, "the link is no session, but its name is taken")
	_, err = checkpoint.OpenSessionStore[int](r, "001")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	err = r.SetMeta(ctx, "001", nil)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// TestCreateOverASymlinkMakesNoHiddenSession: a symbolic link at a
// session's name (to a directory inside the root) is no session directory:
// Get and OpenSessionStore refuse it, List skips it, and Create either
// refuses it or returns a session Get sees; it never writes session.json
// through the link.
func TestCreateOverASymlinkMakesNoHiddenSession(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, unixOnly)
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".elsewhere"), 0o755))
	require.NoError(t, os.Symlink(".elsewhere", filepath.Join(dir, "run")))
	r, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	s, cerr := r.Create(ctx, "run", nil)
	_, gerr := r.Get(ctx, "run")
	_, statErr := os.Lstat(filepath.Join(dir, ".elsewhere", "session.json"))
	require.Truef(t, cerr != nil || gerr == nil, "Create returned session %q (nil error) that Get refuses: %v", s.ID, gerr)
	require.ErrorIs(t, statErr, os.ErrNotExist, "Create wrote session.json through the symbolic link")
}

// TestCreateOverAFileSaysExists: a file at the ID's name takes the ID:
// Create's error wraps ErrExists (an ID already taken is ErrExists), as
// Get's wraps ErrNotFound, not a bare ENOTDIR.
func TestCreateOverAFileSaysExists(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, unixOnly)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run"), []byte("x"), 0o644))
	r, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(context.Background(), "run", nil)
	require.ErrorIs(t, err, checkpoint.ErrExists)
}

// TestCreateOverAFIFOFailsWithoutHanging: a FIFO at a session's name makes
// Create fail, never hang.
func TestCreateOverAFIFOFailsWithoutHanging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "run"))
	r, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	done := make(chan error, 1)
	go func() { _, err := r.Create(context.Background(), "run", nil); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err)
		t.Log(err)
	case <-time.After(5 * time.Second):
		t.Fatal("Create over a FIFO hangs")
	}
}

// TestOpenSessionsOnAFIFOFailsWithoutHanging: OpenSessions on a path that
// is a FIFO fails, never hangs. (Open on one: TestOpenOnAFIFOFailsWithoutHanging.)
func TestOpenSessionsOnAFIFOFailsWithoutHanging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "root"))
	done := make(chan error, 1)
	go func() { _, err := checkpoint.OpenSessions(filepath.Join(dir, "root")); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("OpenSessions on a FIFO hangs")
	}
}

// TestDirChildThatIsNoDirectoryIsRefused: the directory backend opens a
// child store (Sub, a session's directory) only on a subdirectory: on a
// named pipe its calls return, never hang, and through a symbolic link
// they write nothing. Reading such a child is ErrInvalid; creating it,
// ErrExists.
func TestDirChildThatIsNoDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, unixOnly)
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".elsewhere"), 0o755))
	require.NoError(t, os.Symlink(".elsewhere", filepath.Join(dir, "link")))
	mkfifo(t, filepath.Join(dir, "pipe"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	b, err := checkpoint.OpenDir(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer b.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, name := range []string{"link", "pipe", "file"} {
			sub, err := b.Sub(ctx, name, false)
			assert.NoError(t, err, name)
			_, err = sub.List(ctx)
			assert.ErrorIs(t, err, checkpoint.ErrInvalid, name)
			_, err = sub.Create(ctx, "x", func(io.Writer) error { return nil })
			assert.ErrorIs(t, err, checkpoint.ErrExists, name)
			assert.ErrorContains(t, err, filepath.Join(dir, name), "the error names the child")
			assert.NoError(t, sub.Close())
			_, err = b.Sub(ctx, name, true)
			assert.ErrorIs(t, err, checkpoint.ErrExists, name)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a child store on a named pipe hangs")
	}
	_, err = os.Lstat(filepath.Join(dir, ".elsewhere", "x"))
	require.ErrorIs(t, err, os.ErrNotExist, "a write went through the symbolic link")
}

// TestRemoveStagingGoesPastAnOddChild: one child whose claim is not a
// regular file (a directory here) does not stop RemoveStaging from
// removing what a crashed fork left in another child.
func TestRemoveStagingGoesPastAnOddChild(t *testing.T) {
	t.Parallel()
	skipOnWindows(t, unixOnly)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "aa", ".session.claim"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "zz"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zz", ".session.claim"), []byte(`{"op":"fork","token":"x","time":"2026-01-01T00:00:00Z"}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zz", "step_00000001.json"), []byte("x"), 0o644))
	r, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	removed, err := r.RemoveStaging(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "zz")}, removed)
}
