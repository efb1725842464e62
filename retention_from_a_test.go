package checkpoint_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// Retention never removes the newest checkpoint that loads, and a file of a
// newer schema counts as one: it is a newer release's, not damage.
func TestRetentionKeepsNewerSchemaFileAsLoadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveAt(t, dir, 1, heroV1{Name: "Ana"}, checkpoint.WithSchema(1, heroMigrations[0]))
	saveAt(t, dir, 2, heroV1{Name: "Ana"}, checkpoint.WithSchema(1, heroMigrations[0]))
	saveAt(t, dir, 3, heroV2{Name: "Ana"}, checkpoint.WithSchema(2, heroMigrations...))

	// KeepEvery(10) keeps none of steps 1-3: only the newest checkpoint
	// that loads is spared.
	s := openStore[heroV1](t, dir, checkpoint.WithSchema(1, heroMigrations[0]), checkpoint.KeepEvery(10), checkpoint.NoSync())
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, stepsOf(removed))
	require.FileExists(t, filepath.Join(dir, "step_00000003.json"))
}
