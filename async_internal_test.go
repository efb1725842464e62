package checkpoint

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAsyncSaveOnFullQueueHonoursContext holds the write lock, so that the
// save being published cannot finish, fills the queue, and proves that a
// Save waiting for room gives up when its context ends, queueing nothing.
func TestAsyncSaveOnFullQueueHonoursContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), Async(1))
	s.wmu.Lock()
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	q := s.async
	q.mu.Lock()
	for !q.busy { // the store's goroutine has taken step 1
		q.wait(nil)
	}
	q.mu.Unlock()
	_, err = s.Save(ctx, 2, 2) // fills the queue
	require.NoError(t, err)

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := s.Save(cctx, 3, 3)
		done <- err
	}()
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	s.wmu.Unlock()

	require.NoError(t, s.Flush(ctx))
	_, _, err = s.Load(ctx, 3)
	require.ErrorIs(t, err, ErrNotFound)
	for step := int64(1); step <= 2; step++ {
		_, _, err = s.Load(ctx, step)
		require.NoError(t, err)
	}
}
