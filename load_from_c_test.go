package checkpoint_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"

	"github.com/stretchr/testify/require"
)

// LoadInfo looks an Info's name up in the store's own directory only: an
// Info of another store's file, or a path that climbs out, is ErrNotFound
// or ErrInvalid.
func TestLoadInfoNeverLeavesTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent := t.TempDir()
	other := openStore[int](t, filepath.Join(parent, "other"), checkpoint.WithLayout("c", 3))
	outside, err := other.Save(ctx, 5, 666)
	require.NoError(t, err)

	s := openStore[int](t, filepath.Join(parent, "mine"), checkpoint.WithLayout("c", 3))
	_, err = s.Save(ctx, 1, 1)
	require.NoError(t, err)
	// An Info of another store's file: its name is looked up in this
	// store's directory only.
	_, _, err = s.LoadInfo(ctx, outside)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	for _, path := range []string{"../other/c_005.json", "/etc/passwd", filepath.Join(parent, "other", "..", "..")} {
		_, _, err = s.LoadInfo(ctx, checkpoint.Info{Step: 5, Path: path, Format: 1})
		require.Error(t, err, path)
		require.True(t, errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrInvalid), "%s: %v", path, err)
	}
}
