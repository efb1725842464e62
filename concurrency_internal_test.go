package checkpoint

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckpointSavedDuringAListStaysKnownToRetention: a List reads the
// directory, a save publishes a checkpoint, then the List drops the cached
// headers of files its read did not see. The new checkpoint's header stays
// cached, so that the prune after the next save, which judges from the
// cache, removes that file as the rules say. It examines the header cache
// between the steps of one List, which only package checkpoint can.
func TestCheckpointSavedDuringAListStaysKnownToRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, NoSync(), KeepMultiplesOf(2), KeepLast(1))
	for step := int64(1); step <= 4; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	// A List's scan: the cache generation, then the directory's names
	// (steps 2 and 4).
	s.mu.Lock()
	start := s.cacheGen
	s.mu.Unlock()
	var read []entry
	_, err := s.eachName(ctx, nil, func(int) {}, func(o Object, fn fileName, _ error) {
		read = append(read, entry{name: o.Name, fn: fn, obj: o})
	})
	require.NoError(t, err)
	require.Len(t, read, 2)
	// A save lands between the read and the List's trim.
	_, err = s.Save(ctx, 5, 5)
	require.NoError(t, err)
	s.trimCache(read, start)
	s.mu.Lock()
	_, known := s.headers["step_00000005.json"]
	s.mu.Unlock()
	require.True(t, known, "the checkpoint saved during the List was dropped from the cache")

	_, err = s.Save(ctx, 6, 6)
	require.NoError(t, err)
	names := dirNames(t, s.Location())
	var left []string
	for _, n := range names {
		if strings.HasPrefix(n, "step_") {
			left = append(left, n)
		}
	}
	slices.Sort(left)
	require.Equal(t, []string{"step_00000002.json", "step_00000004.json", "step_00000006.json"}, left, "step 5 is removed by the next save's prune")
}
