//go:build unix

package checkpoint_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// TestCreateOverASymlinkMakesNoHiddenSession: a symbolic link at a
// session's name (to a directory inside the root) is no session directory:
// Get and OpenSessionStore refuse it, List skips it. Create must refuse it
// too, rather than return a session, with a nil error, that no other call
// can see (its session.json written through the link).
func TestCreateOverASymlinkMakesNoHiddenSession(t *testing.T) {
	t.Parallel()
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

// TestCreateOverAFIFOReturns: a FIFO at a session's name must make Create
// fail, never hang.
func TestCreateOverAFIFOReturns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, syscallMkfifo(filepath.Join(dir, "run")))
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

func syscallMkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }

// TestOddStagingDirectoryDoesNotBlockNew: a directory named like an
// earlier release's staging directory but holding a subdirectory (put
// there by hand, or by another tool) must not make every New, Create and
// Fork of the root fail for ever.
func TestOddStagingDirectoryDoesNotBlockNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".staging-tool", "cache"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".staging-tool", "cache", "x"), nil, 0o644))
	r, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	_, err = r.New(context.Background(), nil)
	require.NoError(t, err, "New fails for ever on this root")
}

// TestCreateOverAFileSaysExists: a file at the ID's name takes the ID:
// Create's error wraps ErrExists ("an ID already taken is ErrExists"), as
// Get's wraps ErrNotFound, not a bare ENOTDIR.
func TestCreateOverAFileSaysExists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run"), []byte("x"), 0o644))
	r, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(context.Background(), "run", nil)
	require.ErrorIs(t, err, checkpoint.ErrExists)
}

// TestRemoveStagingGoesPastAnOddChild: one child whose claim is not a
// regular file (a directory here) must not stop RemoveStaging from
// removing what a crashed fork left in another child.
func TestRemoveStagingGoesPastAnOddChild(t *testing.T) {
	t.Parallel()
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

// TestOpenOnAFIFOReturns: Open and OpenSessions on a path that is a FIFO
// must fail, never hang.
func TestOpenOnAFIFOReturns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"store", "root"} {
		require.NoError(t, syscallMkfifo(filepath.Join(dir, name)))
	}
	done := make(chan error, 2)
	go func() { _, err := checkpoint.Open[int](filepath.Join(dir, "store")); done <- err }()
	go func() { _, err := checkpoint.OpenSessions(filepath.Join(dir, "root")); done <- err }()
	timeout := time.After(5 * time.Second)
	for range 2 {
		select {
		case err := <-done:
			require.Error(t, err)
		case <-timeout:
			t.Fatal("Open or OpenSessions on a FIFO hangs")
		}
	}
}

// TestDirChildThatIsNoDirectoryIsRefused: the directory backend opens a
// child store (Sub) only on a subdirectory: on a named pipe its calls
// return, never hang, and through a symbolic link they write nothing.
// Reading such a child is ErrInvalid; creating it, ErrExists.
func TestDirChildThatIsNoDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".elsewhere"), 0o755))
	require.NoError(t, os.Symlink(".elsewhere", filepath.Join(dir, "link")))
	require.NoError(t, syscallMkfifo(filepath.Join(dir, "pipe")))
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

// TestLegacyStagingRemovalStaysInTheRoot: a staging directory of an
// earlier release is removed whole, its subdirectories too, and a
// symbolic link in it is removed, never followed; one nested deeper than
// any release made is left, and named by RemoveStaging's error, but never
// blocks New.
func TestLegacyStagingRemovalStaysInTheRoot(t *testing.T) {
	t.Parallel()
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
	r, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	s, err := r.New(ctx, nil)
	require.NoError(t, err, "a staging directory that cannot be removed blocks New")
	require.Equal(t, "001", s.ID)
	require.NoDirExists(t, filepath.Join(dir, ".staging-a"))
	require.FileExists(t, filepath.Join(base, "outside", "keep"), "the removal followed a symbolic link out of the root")
	removed, err := r.RemoveStaging(ctx)
	require.ErrorContains(t, err, filepath.Join(dir, ".staging-deep"))
	require.Empty(t, removed, "RemoveStaging reports a directory it did not remove")
	require.DirExists(t, filepath.Join(dir, ".staging-deep"))
}
