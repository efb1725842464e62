package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The first List of a store opens every file with no stat before it (see
// fill): the open itself must refuse what is not a regular file, a
// symbolic link inside the directory above all, which os.Root follows.
func TestFirstListOpensNoSymlinkFIFOOrDirectoryAtACheckpointName(t *testing.T) {
	t.Parallel()
	requireSymlinks(t)
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[corpusState](t, dir, WithLayout("c", 3))
	one, err := w.Save(ctx, 1, corpusStateAt(1))
	require.NoError(t, err)
	two, err := w.Save(ctx, 2, corpusStateAt(2))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	// Step 2's good checkpoint moves to a name that is no checkpoint's,
	// and a symbolic link takes its place: following it would list and
	// load step 2 from a file that is not the store's.
	require.NoError(t, os.Rename(two.Path, filepath.Join(dir, "elsewhere.json")))
	require.NoError(t, os.Symlink("elsewhere.json", two.Path))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "c_003.json"), 0o755))
	if haveFIFOs {
		mkfifo(t, filepath.Join(dir, "c_004.json"))
	}

	s := openStore[corpusState](t, dir, WithLayout("c", 3), ReadOnly())
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "%+v", list)
	require.Equal(t, one.Path, list[0].Path)
	_, _, err = s.Load(ctx, 2)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "symbolic link")
	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step)
	require.Equal(t, corpusStateAt(1), got)
}
