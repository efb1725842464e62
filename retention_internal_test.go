package checkpoint

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// steps, manualClock and checkpointNames serve the other internal test
// files too; the black-box tests have their own, in retention_test.go.

// steps returns the steps of infos, in order.
func steps(infos []Info) []int64 {
	var out []int64
	for _, i := range infos {
		out = append(out, i.Step)
	}
	return out
}

// manualClock is a clock the test sets.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// checkpointNames lists the checkpoint files in dir, sorted.
func checkpointNames(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, name := range dirNames(t, dir) {
		if name != lockName {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

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
