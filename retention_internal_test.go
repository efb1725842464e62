package checkpoint

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// The prune after a save trusts the Version the save cached for its own
// file, not a Version it does not know (a stat after publishing failed):
// then it judges from a scan, as for any file it cannot vouch for.
func TestPruneTrustsTheSavedFileOnlyWithItsVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), KeepLast(2))
	var name string
	for step := int64(1); step <= 3; step++ {
		info, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
		name = info.Name()
	}
	require.True(t, s.stillCached(ctx, name, name))
	s.mu.Lock()
	c := s.headers[name]
	c.obj.Version = ""
	s.headers[name] = c
	s.mu.Unlock()
	require.False(t, s.stillCached(ctx, name, name))
	require.False(t, s.stillCached(ctx, name, ""))
	// The next save's prune scans, and keeps the rule all the same.
	_, err := s.Save(ctx, 4, 4)
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, int64(3), list[0].Step)
}
