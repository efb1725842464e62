package dirstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// countPoints counts the fault points a store passes, failing none.
type countPoints struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *countPoints) fault(point, _ string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[point]++
	return nil
}

func (c *countPoints) take(point string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.counts[point]
	c.counts = map[string]int{}
	return n
}

// TestSaveWithRetentionSyncsTheDirectoryOnce: once a store has pruned once
// (reading the directory), a save that prunes pays one directory fsync, its
// own, not a second one after removing, and still removes what the rule
// says.
func TestSaveWithRetentionSyncsTheDirectoryOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	c := &countPoints{counts: map[string]int{}}
	s := openFaulty[int](t, dir, c.fault, nil, checkpoint.WithLayout("c", 3), checkpoint.KeepLast(2))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	c.take("dirsync")
	for step := int64(4); step <= 8; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
		require.Equal(t, 1, c.take("dirsync"), "step %d", step)
		require.Equal(t, []string{fmt.Sprintf("c_%03d.json", step-1), fmt.Sprintf("c_%03d.json", step)}, checkpointNames(t, dir))
	}
}
