package checkpoint_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// TestOpenThroughAWrapperRemovesStaleTemps: a crash at any instant leaves
// at worst a temporary file that the next Open removes, also when the
// writer opens the directory through a pass-through wrapper (one that says
// what it wraps, as passThrough does) that implements no TempCleaner.
func TestOpenThroughAWrapperRemovesStaleTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, ".step_00000001.json.ckpt-tmp-123")
	require.NoError(t, os.WriteFile(tmp, []byte("x"), 0o644))
	b, err := checkpoint.OpenDir(dir, checkpoint.NoSync())
	require.NoError(t, err)
	st, err := checkpoint.OpenBackend[int](passThrough{b}, checkpoint.NoSync())
	require.NoError(t, err)
	defer st.Close()
	_, err = os.Lstat(tmp)
	require.ErrorIs(t, err, os.ErrNotExist, "the writer's Open left the temporary file of a crashed save")
}
