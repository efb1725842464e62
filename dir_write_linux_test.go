//go:build linux

package checkpoint

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
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

func testFdOpsWriteAndPublish(t *testing.T, linkOnly bool) {
	dir := t.TempDir()
	d, err := os.Open(dir)
	require.NoError(t, err)
	defer d.Close()
	conn, err := d.SyscallConn()
	require.NoError(t, err)
	ops := fdOps{dir: conn, path: dir, prefix: dir + string(filepath.Separator), linkOnly: new(atomic.Bool)}
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
