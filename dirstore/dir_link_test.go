package dirstore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/storage"
)

// TestDirLinkContract checks the directory's Linker: a link shares the
// file and is a new name in the receiver; an existing name is ErrExists
// and stays as it was, a missing one fs.ErrNotExist, and a source that is
// not a sibling child store ErrUnsupported, with nothing left behind.
func TestDirLinkContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	root, err := Open(dir, NoSync())
	require.NoError(t, err)
	defer root.Close()
	sub := func(b storage.Backend, name string) storage.Backend {
		s, err := b.Sub(ctx, name, false)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	write := func(data string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, data); return err }
	}
	a, b := sub(root, "a"), sub(root, "b")
	_, err = a.Create(ctx, "x.json", write("x"))
	require.NoError(t, err)

	l, ok := b.(storage.Linker)
	require.True(t, ok, "a directory's child store is a storage.Linker")
	o, err := l.Link(ctx, a, "x.json")
	require.NoError(t, err, "b is created by its first link")
	require.Equal(t, "x.json", o.Name)
	fa, err := os.Stat(filepath.Join(dir, "a", "x.json"))
	require.NoError(t, err)
	fb, err := os.Stat(filepath.Join(dir, "b", "x.json"))
	require.NoError(t, err)
	require.True(t, os.SameFile(fa, fb))

	_, err = l.Link(ctx, a, "x.json")
	require.ErrorIs(t, err, storage.ErrExists)
	_, err = l.Link(ctx, a, "missing.json")
	require.ErrorIs(t, err, fs.ErrNotExist)
	other, err := Open(t.TempDir(), NoSync())
	require.NoError(t, err)
	defer other.Close()
	_, err = l.Link(ctx, sub(other, "c"), "x.json")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = sub(a, "deeper").(storage.Linker).Link(ctx, a, "x.json")
	require.ErrorIs(t, err, errors.ErrUnsupported, "a child of a child is no sibling")
	require.Equal(t, []string{"x.json"}, dirNames(t, filepath.Join(dir, "b")))
}

// TestDirRemoveChildContract checks the directory's ChildRemover: an
// empty subdirectory goes, a missing one is no error, one that holds a
// file stays (ErrExists), and a file is no child store (ErrInvalid).
func TestDirRemoveChildContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	root, err := Open(dir, NoSync())
	require.NoError(t, err)
	defer root.Close()
	cr := root.(storage.ChildRemover)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "full"), 0o755))
	touch(t, filepath.Join(dir, "full"), ".hidden")
	touch(t, dir, "file")

	require.NoError(t, cr.RemoveChild(ctx, "empty"))
	require.NoDirExists(t, filepath.Join(dir, "empty"))
	require.NoError(t, cr.RemoveChild(ctx, "missing"))
	require.ErrorIs(t, cr.RemoveChild(ctx, "full"), storage.ErrExists)
	require.DirExists(t, filepath.Join(dir, "full"))
	require.ErrorIs(t, cr.RemoveChild(ctx, "file"), storage.ErrInvalid)
	require.FileExists(t, filepath.Join(dir, "file"))
}
