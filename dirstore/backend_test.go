package dirstore_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
	"github.com/gocheckpoint/checkpoint/storage"
)

// The local directory keeps the contract of storage.Backend.
func TestDirBackendConforms(t *testing.T) {
	var opts []backendtest.Option
	if platformtest.UnderWine() {
		// Wine 8 has no POSIX rename (FileRenameInformationEx): as on a
		// FAT volume, a file that is open cannot be renamed over.
		opts = append(opts, backendtest.ReplaceWaitsForReaders())
	}
	if runtime.GOOS != "windows" {
		// Windows' Lstat tells no inode change time: a rewrite in place
		// that restores the modification time keeps the Version there
		// (see the README's platform notes).
		opts = append(opts, backendtest.RewriteInPlace(rewriteFileInPlace))
	}
	backendtest.Run(t, func(t *testing.T) backendtest.Opener {
		dir := t.TempDir()
		return func() (storage.Backend, error) { return dirstore.Open(dir, dirstore.NoSync()) }
	}, opts...)
}

// rewriteFileInPlace writes p over the file of name without a new inode
// and restores its modification time, as cp -p over it would, touching it
// until its inode change time moves (see platformtest.RewriteInPlace).
func rewriteFileInPlace(t *testing.T, b storage.Backend, name string, p []byte) {
	t.Helper()
	platformtest.RewriteInPlace(t, b.Locate(name), p)
}

// Rename publishes without replacing: a file another program creates at
// the destination between any check and the move is never destroyed. The
// fault seam creates it at the last point before the move, both for a plain
// name (on Linux, system calls on the directory's descriptor) and for one
// that goes through os.Root.
func TestDirRenameNeverReplacesAFileCreatedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, to := range []string{"step_00000007.json.corrupt", "step 7.corrupt"} {
		t.Run(to, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			theirs := []byte("a file of another program")
			b := openNoSync(t, dir)
			dirstore.SetFault(b, func(point, name string) error {
				if point == "quarantine" {
					require.NoError(t, os.WriteFile(filepath.Join(dir, to), theirs, 0o644))
				}
				return nil
			})
			_, err := b.Create(ctx, "step_00000007.json", writeString("damaged"))
			require.NoError(t, err)

			err = b.Rename(ctx, "step_00000007.json", to)
			require.ErrorIs(t, err, storage.ErrExists)
			got, err := os.ReadFile(filepath.Join(dir, to))
			require.NoError(t, err)
			require.Equal(t, theirs, got, "Rename replaced a file created at its destination")
			got, err = os.ReadFile(filepath.Join(dir, "step_00000007.json"))
			require.NoError(t, err)
			require.Equal(t, "damaged", string(got), "a refused Rename changed its source")
		})
	}
}

// A file rewritten in place, with its size kept and its modification time
// restored (cp -p, rsync -t, a restore from backup), has a new Version, and
// a conditional Replace on the Version it had is a conflict that changes
// nothing.
func TestDirVersionChangesWhenRewrittenInPlace(t *testing.T) {
	t.Parallel()
	platformtest.SkipOnWindows(t, "Windows' Lstat carries no inode change time: see objectOf")
	ctx := context.Background()
	dir := t.TempDir()
	b := openNoSync(t, dir)
	obj, err := b.Create(ctx, "step_last.json", writeString("rolling 1"))
	require.NoError(t, err)

	path := filepath.Join(dir, "step_last.json")
	platformtest.RewriteInPlace(t, path, []byte("by hand 1")) // same size, same inode, same modification time
	now, err := b.Stat(ctx, "step_last.json")
	require.NoError(t, err)
	require.NotEqual(t, obj.Version, now.Version, "a rewrite in place kept the Version")

	_, err = b.Replace(ctx, "step_last.json", obj.Version, writeString("rolling 2"))
	require.ErrorIs(t, err, storage.ErrConflict)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "by hand 1", string(got), "a conflicting Replace overwrote the rewrite")
}

// A conditional Replace checks the Version again just before it publishes:
// a change made by another program while the new bytes were written,
// synced and closed (the fault seam makes it at the last point before the
// rename) is a conflict that leaves that change as it is and no temporary
// file, for a plain name (on Linux, system calls on the directory's
// descriptor) and for one that goes through os.Root. A Version that is
// stale from the start is a conflict before any byte is written.
func TestDirConditionalReplaceNeverOverwritesAChangeMadeDuringItsWrite(t *testing.T) {
	t.Parallel()
	changes := map[string]struct {
		had    bool                    // the file exists when the Replace starts
		change func(path string) error // what another program does meanwhile
		want   string                  // the file's bytes after; "" for none
	}{
		"rewritten": {true, func(p string) error { return os.WriteFile(p, []byte("by hand, longer"), 0) }, "by hand, longer"},
		"removed":   {true, os.Remove, ""},
		"created":   {false, func(p string) error { return os.WriteFile(p, []byte("by hand"), 0o644) }, "by hand"},
	}
	for what, c := range changes {
		for _, name := range []string{"step_last.json", "side file.json"} {
			t.Run(what+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				dir := t.TempDir()
				path := filepath.Join(dir, name)
				var armed, changed bool // armed once the file is as the store saw it
				b := openNoSync(t, dir)
				dirstore.SetFault(b, func(point, n string) error {
					if point == "publish" && n == name && armed && !changed {
						changed = true
						require.NoError(t, c.change(path))
					}
					return nil
				})
				version := storage.NoObject
				if c.had {
					obj, err := b.Create(ctx, name, writeString("rolling 1"))
					require.NoError(t, err)
					version = obj.Version
				}
				armed = true

				_, err := b.Replace(ctx, name, version, writeString("rolling 2"))
				require.ErrorIs(t, err, storage.ErrConflict)
				require.True(t, changed)
				got, err := os.ReadFile(path)
				if c.want == "" {
					require.ErrorIs(t, err, fs.ErrNotExist, "Replace published over a removal")
				} else {
					require.NoError(t, err)
					require.Equal(t, c.want, string(got), "Replace overwrote a change made during its write")
				}
				left, err := os.ReadDir(dir)
				require.NoError(t, err)
				for _, e := range left {
					require.Equal(t, name, e.Name(), "a refused Replace left a file")
				}

				// Stale from the start: nothing is written.
				_, err = b.Replace(ctx, name, version, func(io.Writer) error {
					t.Error("a Replace on a stale Version wrote")
					return nil
				})
				require.ErrorIs(t, err, storage.ErrConflict)
			})
		}
	}
}

// TestDirLinkContract checks the directory's Linker: a link shares the
// file and is a new name in the receiver; an existing name is ErrExists
// and stays as it was, a missing one fs.ErrNotExist, and a source that is
// not a sibling child store ErrUnsupported, with nothing left behind.
func TestDirLinkContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	root := openNoSync(t, dir)
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
	_, err := a.Create(ctx, "x.json", write("x"))
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
	other := openNoSync(t, t.TempDir())
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
	root := openNoSync(t, dir)
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

// openNoSync opens the directory dir with NoSync, closed when the test
// ends.
func openNoSync(t *testing.T, dir string) storage.Backend {
	t.Helper()
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}
