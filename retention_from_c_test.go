package checkpoint

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPruneKindsOfStepOrRollingIsInvalid(t *testing.T) {
	t.Parallel()
	for _, k := range []Kind{KindStep, KindRolling, "final "} {
		_, err := Open[int](t.TempDir(), KeepLast(1), PruneKinds(k))
		require.ErrorIs(t, err, ErrInvalid, k)
		require.ErrorContains(t, err, fmt.Sprintf("PruneKinds(%q)", k))
	}
	s, err := Open[int](t.TempDir(), KeepLast(1), PruneKinds(KindFinal, KindError))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
