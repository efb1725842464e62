package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAttackErrorCheckpointSupersededByAPayload: SaveError: "An error
// checkpoint stays until a clean checkpoint (step, final or rolling) saved
// after it, of the same step or a later one, supersedes it: ... the store
// removes the error checkpoint at its next retention pass (after the next
// step or final save, at a writer's Close, or on Prune), whatever the
// retention rules, even with none"; README, "Byte payloads": "Retained and
// pruned like any checkpoint, by every rule". A byte payload saved by
// SaveFrom after an error checkpoint never supersedes it: the error
// checkpoint is still there after the save, after Prune and after Close
// (a JSON state saved the same way removes it at once).
func TestAttackErrorCheckpointSupersededByAPayload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[[]byte](t, dir)
	ei, err := s.SaveError(ctx, 3, []byte("partial"), errors.New("boom"))
	require.NoError(t, err)
	_, err = s.SaveFrom(ctx, 4, writeAll(payloadBytes(4, 3000)))
	require.NoError(t, err)
	_, err = s.Prune(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = os.Stat(ei.Location)
	require.ErrorIs(t, err, os.ErrNotExist, "an error checkpoint a clean byte payload saved after it superseded is never removed")
}
