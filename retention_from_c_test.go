package checkpoint_test

import (
	"fmt"
	"testing"

	"github.com/gocheckpoint/checkpoint"

	"github.com/stretchr/testify/require"
)

// PruneKinds of the step or rolling kind, or of a kind that is none, is
// ErrInvalid naming the option; of the final and error kinds, it opens.
func TestPruneKindsOfStepOrRollingIsInvalid(t *testing.T) {
	t.Parallel()
	for _, k := range []checkpoint.Kind{checkpoint.KindStep, checkpoint.KindRolling, "final "} {
		_, err := checkpoint.Open[int](t.TempDir(), checkpoint.KeepLast(1), checkpoint.PruneKinds(k))
		require.ErrorIs(t, err, checkpoint.ErrInvalid, k)
		require.ErrorContains(t, err, fmt.Sprintf("PruneKinds(%q)", k))
	}
	s, err := checkpoint.Open[int](t.TempDir(), checkpoint.KeepLast(1), checkpoint.PruneKinds(checkpoint.KindFinal, checkpoint.KindError))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
