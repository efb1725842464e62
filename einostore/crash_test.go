package einostore_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/gocheckpoint/checkpoint/einostore"
	"github.com/stretchr/testify/require"
)

// A process Setting one value after another is killed with kill -9 at
// different points: Get then returns the last value whose Set returned, or
// a later one, never damage; and the ID takes more Sets.
func TestKill9DuringSetsLeavesTheLastAcknowledgedValueOrALaterOne(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("kill -9 is Unix's")
	}
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	const id = "stream"
	last := -1
	for round := range 3 {
		cmd, out := child(t, "sets", dir, id)
		// Kill after a different number of acknowledged Sets each round;
		// the child Sets on meanwhile, so the kill lands anywhere in a Set.
		for range 5 + 7*round {
			i, err := strconv.Atoi(readLine(t, out))
			require.NoError(t, err)
			last = i
		}
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()

		store, err := einostore.New(dir)
		require.NoError(t, err)
		got, found, err := store.Get(ctx, id)
		require.NoError(t, err)
		require.True(t, found)
		i, err := parseValue(id, got)
		require.NoError(t, err)
		require.GreaterOrEqual(t, i, last, "round %d", round)
		require.NoError(t, store.Close())
	}
}
