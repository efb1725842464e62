//go:build linux

package checkpoint

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fdOps' temporary file buffers small writes and passes large ones through:
// whatever the sizes, the file holds the bytes in order, and a name that is
// taken is fs.ErrExist, the file there untouched.
func TestFdOpsWriteAndPublish(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := os.Open(dir)
	require.NoError(t, err)
	defer d.Close()
	ops := fdOps{dirfd: int(d.Fd())}

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
}
