package dirstore

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// lockedDir opens dir durably and takes its writer lock.
func lockedDir(t *testing.T, dir string, opts ...Option) (*dirBackend, func() error) {
	t.Helper()
	b, err := Open(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	unlock, err := b.Lock(context.Background())
	require.NoError(t, err)
	return b.(*dirBackend), unlock
}

func writeBytes(data []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(data); return err }
}

// inode returns the inode of the file name in dir.
func inode(t *testing.T, dir, name string) uint64 {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(dir, name))
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// spareReady waits for a spare being made in d, and reports whether d
// has a spare.
func spareReady(d *dirBackend) bool {
	d.spare.mu.Lock()
	making := d.spare.making
	d.spare.mu.Unlock()
	if making != nil {
		<-making
	}
	ready, _ := d.spare.state()
	return ready
}

// spareInode returns the inode of d's spare, once made; it fails if there
// is none.
func spareInode(t *testing.T, d *dirBackend) uint64 {
	t.Helper()
	spareReady(d)
	d.spare.mu.Lock()
	defer d.spare.mu.Unlock()
	require.NotNil(t, d.spare.f, "no spare")
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(d.spare.f.(*fdTemp).fd, &st))
	require.Zero(t, st.Nlink, "the spare has a name")
	return st.Ino
}

// requireNoTemps checks that dir holds names and the lock file only.
func requireNoTemps(t *testing.T, dir string, names ...string) {
	t.Helper()
	want := append([]string{LockName}, names...)
	require.ElementsMatch(t, want, testkit.DirNames(t, dir))
}

// A durable write of a directory that holds its lock makes, while it
// waits for its fsync, the file the next write starts from: a file with no
// name, which no listing shows. The next write is published from that very
// file (its inode), whole, and makes the next spare. The lock's release
// closes the spare, and a write without the lock makes none.
func TestADurableWriteStartsFromTheSpareTheLastOneMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, unlock := lockedDir(t, dir)

	_, err := d.Create(ctx, "a", writeBytes([]byte("first")))
	require.NoError(t, err)
	ino := spareInode(t, d)
	requireNoTemps(t, dir, "a")

	second := bytes.Repeat([]byte("second "), 20<<10)
	_, err = d.Create(ctx, "b", writeBytes(second))
	require.NoError(t, err)
	require.Equal(t, ino, inode(t, dir, "b"), "b was not written to the spare")
	got, err := os.ReadFile(filepath.Join(dir, "b"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(second, got))

	// A replacement takes the spare too.
	ino = spareInode(t, d)
	_, err = d.Replace(ctx, "a", "", writeBytes([]byte("again")))
	require.NoError(t, err)
	require.Equal(t, ino, inode(t, dir, "a"))
	requireNoTemps(t, dir, "a", "b")

	spareInode(t, d)
	old := d.spare.f.(*fdTemp)
	require.NoError(t, unlock())
	require.False(t, spareReady(d))
	require.Equal(t, -1, old.fd, "the lock's release left the spare open")

	_, err = d.Create(ctx, "c", writeBytes([]byte("unlocked")))
	require.NoError(t, err)
	require.False(t, spareReady(d), "a write without the lock made a spare")
	require.ElementsMatch(t, []string{LockName, "a", "b", "c"}, testkit.DirNames(t, dir))
}

// Close closes the spare; a directory opened with NoSync makes none (it
// has no fsync to make it beside).
func TestCloseFreesTheSpareAndNoSyncMakesNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := lockedDir(t, t.TempDir())
	_, err := d.Create(ctx, "a", writeBytes([]byte("x")))
	require.NoError(t, err)
	spareInode(t, d)
	old := d.spare.f.(*fdTemp)
	require.NoError(t, d.Close())
	require.Equal(t, -1, old.fd)
	require.False(t, spareReady(d))

	n, _ := lockedDir(t, t.TempDir(), NoSync())
	_, err = n.Create(ctx, "a", writeBytes([]byte("x")))
	require.NoError(t, err)
	require.False(t, spareReady(n), "NoSync made a spare")
}

// namingFails are a directory's fdOps whose naming of a spare fails with
// err.
type namingFails struct {
	fdOps
	err error
}

func (n namingFails) nameSpare(tempFile, string) (string, error) { return "", n.err }

// A spare that cannot be named is closed and the write creates its file as
// it would without one, and succeeds. A refusal (no /proc, a sandbox)
// stops the directory making spares; a failure of the moment (a full disk)
// does not.
func TestASpareThatCannotBeNamedIsNotUsed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"refused", &os.LinkError{Op: "linkat", Err: unix.EPERM}, true},
		{"full disk", &os.LinkError{Op: "linkat", Err: unix.ENOSPC}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d, _ := lockedDir(t, dir)
			root := d.root.Load()
			ops := d.ops(root, "a").(fdOps)
			o := d.io()
			o.spare = &d.spare
			_, err := writeFile(ops, "a", writeBytes([]byte("a")), false, o)
			require.NoError(t, err)
			spareInode(t, d)
			spare := d.spare.f.(*fdTemp)

			_, err = writeFile(namingFails{ops, c.err}, "b", writeBytes([]byte("bee")), false, o)
			require.NoError(t, err)
			require.Equal(t, -1, spare.fd, "the spare was not closed")
			got, err := os.ReadFile(filepath.Join(dir, "b"))
			require.NoError(t, err)
			require.Equal(t, "bee", string(got))
			requireNoTemps(t, dir, "a", "b")
			require.Equal(t, c.refused, d.spare.refused.Load())
			require.Equal(t, !c.refused, spareReady(d), "spares go on unless refused")
		})
	}
}
