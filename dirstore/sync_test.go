package dirstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/testkit"
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

// heldAfterStepOne returns hooks whose OnSave of step 1 holds the Async
// store's goroutine until release is closed, and closes entered when it
// begins: the saves queued meanwhile are published together by the next
// Flush.
func heldAfterStepOne() (h checkpoint.Hooks, entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	h.OnSave = func(info checkpoint.Info) {
		if info.Step == 1 {
			close(entered)
			<-release
		}
	}
	return h, entered, release
}

// TestAsyncBatchSyncsTheDirectoryOnce: the saves an Async store finds
// queued together are each written and synced, then published with one
// directory fsync for them all, and every one of them is there whole.
func TestAsyncBatchSyncsTheDirectoryOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	c := &countPoints{counts: map[string]int{}}
	hooks, entered, release := heldAfterStepOne()
	s := openFaulty[int](t, dir, c.fault, nil, checkpoint.WithLayout("c", 3), checkpoint.Async(8), checkpoint.WithHooks(hooks))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	<-entered
	c.take("dirsync")
	for step := int64(2); step <= 5; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	c.mu.Lock()
	syncs, dirsyncs := c.counts["sync"], c.counts["dirsync"]
	c.mu.Unlock()
	close(release)
	require.Equal(t, 4, syncs, "each file is synced")
	require.Equal(t, 1, dirsyncs, "one directory sync for the batch")
	require.Equal(t, []string{"c_001.json", "c_002.json", "c_003.json", "c_004.json", "c_005.json"}, checkpointNames(t, dir))
	requireListedLoad(t, s)
}

// TestAsyncBatchWhoseCommitFailsLeavesNoneOfIt: when the directory sync
// of a batch fails, every save of the batch fails (Flush names each step),
// none of its files is left, nothing else is touched, and the same saves
// then succeed.
func TestAsyncBatchWhoseCommitFailsLeavesNoneOfIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var armed atomic.Bool
	fault := func(point, name string) error {
		if point == "dirsync" && name == "" && armed.CompareAndSwap(true, false) {
			return testkit.ErrInjected
		}
		return nil
	}
	hooks, entered, release := heldAfterStepOne()
	s := openFaulty[int](t, dir, fault, nil, checkpoint.WithLayout("c", 3), checkpoint.Async(8), checkpoint.WithHooks(hooks))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	<-entered
	before := dirState(t, dir)
	for step := int64(2); step <= 4; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	armed.Store(true)
	err = s.Flush(ctx)
	close(release)
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.ErrorIs(t, err, testkit.ErrInjected)
	require.ErrorContains(t, err, "steps 2, 3, 4")
	require.Equal(t, before, dirState(t, dir), "the old set of files, byte for byte")
	for step := int64(2); step <= 4; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	require.Equal(t, []string{"c_001.json", "c_002.json", "c_003.json", "c_004.json"}, checkpointNames(t, dir))
}

// TestAsyncBatchFailsASaveAlone: a save of a batch that fails (a step
// queued twice: the second finds it taken) fails alone, reported for its
// own step as a save made alone would be; the others of the batch are
// published, durable and reported to OnSave.
func TestAsyncBatchFailsASaveAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	c := &countPoints{counts: map[string]int{}}
	hooks, entered, release := heldAfterStepOne()
	var mu sync.Mutex
	var saved []int64
	held := hooks.OnSave
	hooks.OnSave = func(info checkpoint.Info) {
		mu.Lock()
		saved = append(saved, info.Step)
		mu.Unlock()
		held(info)
	}
	s := openFaulty[int](t, dir, c.fault, nil, checkpoint.WithLayout("c", 3), checkpoint.Async(8), checkpoint.WithHooks(hooks))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	<-entered
	c.take("dirsync")
	for _, step := range []int64{2, 2, 3} {
		_, err := s.Save(ctx, step, int(step)*10)
		require.NoError(t, err)
	}
	err = s.Flush(ctx)
	close(release)
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorContains(t, err, "step 2:")
	var e *checkpoint.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, int64(2), e.Step)
	require.Equal(t, "async save", e.Op)
	require.Equal(t, 1, c.take("dirsync"), "the others were committed together")
	require.Equal(t, []string{"c_001.json", "c_002.json", "c_003.json"}, checkpointNames(t, dir))
	v, _, err := s.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 20, v)
	mu.Lock()
	require.Equal(t, []int64{1, 2, 3}, saved)
	mu.Unlock()
}
