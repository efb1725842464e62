//go:build linux

package dirstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// fdOps' temporary file buffers small writes and passes large ones through:
// whatever the sizes, the file holds the bytes in order, and a name that is
// taken is fs.ErrExist, the file there untouched; by renameat2 and by the
// hard link that replaces it where renameat2 is refused.
func TestFdOpsWriteAndPublish(t *testing.T) {
	t.Parallel()
	for _, linkOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("linkOnly=%v", linkOnly), func(t *testing.T) {
			t.Parallel()
			testFdOpsWriteAndPublish(t, linkOnly)
		})
	}
}

// openFdOps returns the fdOps of dir, opened until the test ends (or the
// directory it also returns is closed).
func openFdOps(t *testing.T, dir string) (fdOps, *os.File) {
	t.Helper()
	d, err := os.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	conn, err := d.SyscallConn()
	require.NoError(t, err)
	return fdOps{dir: conn, path: dir, prefix: dir + string(filepath.Separator), linkOnly: new(atomic.Bool)}, d
}

func testFdOpsWriteAndPublish(t *testing.T, linkOnly bool) {
	dir := t.TempDir()
	ops, d := openFdOps(t, dir)
	ops.linkOnly.Store(linkOnly)

	var want bytes.Buffer
	f, tmp, err := ops.createTemp("step_00000001.json")
	require.NoError(t, err)
	require.Contains(t, tmp, tempPrefix("step_00000001.json"))
	for i, n := range []int{100, fdTempBuffer - 100, 1, fdTempBuffer + 7, 3, fdTempBuffer, 0, 5} {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		w, err := f.Write(p)
		require.NoError(t, err)
		require.Equal(t, n, w)
		want.Write(p)
	}
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.Error(t, f.Close()) // closed once
	moved, err := ops.publishNew(tmp, "step_00000001.json")
	require.NoError(t, err)
	require.Equal(t, !linkOnly, moved)
	if !moved {
		require.NoError(t, ops.remove(tmp))
	}
	got, err := os.ReadFile(filepath.Join(dir, "step_00000001.json"))
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), got)

	f, tmp, err = ops.createTemp("step_00000001.json")
	require.NoError(t, err)
	_, err = f.Write([]byte("other"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = ops.publishNew(tmp, "step_00000001.json")
	require.ErrorIs(t, err, fs.ErrExist)
	require.NoError(t, ops.remove(tmp))
	got, err = os.ReadFile(filepath.Join(dir, "step_00000001.json"))
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), got)
	require.NoError(t, ops.syncDir())
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1)

	// Once the directory is closed, every step fails, naming the file.
	f, tmp, err = ops.createTemp("step_00000002.json")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, d.Close())
	_, err = ops.publishNew(tmp, "step_00000002.json")
	require.ErrorIs(t, err, fs.ErrClosed)
	require.ErrorContains(t, err, filepath.Join(dir, "step_00000002.json"))
	require.ErrorIs(t, ops.syncDir(), fs.ErrClosed)
	_, _, err = ops.createTemp("step_00000003.json")
	require.ErrorIs(t, err, fs.ErrClosed)
	require.NoError(t, os.Remove(filepath.Join(dir, tmp)))
}

// A backend's Close waits for a write under way on the directory's
// descriptor: once Close returns (and the writer lock is released), that
// write has published or failed, and nothing of it goes on.
func TestDirCloseWaitsForAWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(dir, NoSync())
	require.NoError(t, err)
	d := b.(*dirBackend)
	_, err = b.Lock(ctx)
	require.NoError(t, err)
	in, release := make(chan struct{}), make(chan struct{})
	created := make(chan error, 1)
	go func() {
		_, err := b.Create(ctx, "step_00000001.json", func(w io.Writer) error {
			close(in)
			<-release
			_, err := w.Write([]byte("whole"))
			return err
		})
		created <- err
	}()
	<-in
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	// Close is waiting once a reader can no longer get the lock; it must
	// not return before the write does.
	for {
		select {
		case <-closed:
			t.Fatal("Close returned while a write was under way")
		default:
		}
		if !d.writing.TryRLock() {
			break
		}
		d.writing.RUnlock()
		runtime.Gosched()
	}
	close(release)
	require.NoError(t, <-closed)
	require.NoError(t, <-created)
	data, err := os.ReadFile(filepath.Join(dir, "step_00000001.json"))
	require.NoError(t, err)
	require.Equal(t, "whole", string(data))
	for _, n := range testkit.DirNames(t, dir) {
		require.NotContains(t, n, tempMarker)
	}
}

// A renameat2 that fails for a reason of its own (here: the temporary file
// is gone) is the error reported, not the hard link's that follows it.
func TestPublishReportsRenameat2sOwnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ops, _ := openFdOps(t, dir)
	_, err := ops.publishNew(".gone.ckpt-tmp-1", "step_00000001.json")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "renameat2")
	require.ErrorContains(t, err, filepath.Join(dir, ".gone.ckpt-tmp-1"))
	require.False(t, ops.linkOnly.Load())
}
