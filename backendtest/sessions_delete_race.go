package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

// testBackendConcurrentDeletesOfOneID runs two Deletes of one session at
// once, from two workers, many times. Delete promises that a missing
// session is ErrNotFound and a held one ErrLocked: the loser fails with
// one of those (or nil), never otherwise, and the session is gone.
func testBackendConcurrentDeletesOfOneID(t *testing.T, w workers) {
	ctx := context.Background()
	r1, r2 := w.open(t), w.open(t)
	for i := range 40 {
		id := fmt.Sprintf("user:1/thread#%d", i)
		_, err := r1.Create(ctx, id, nil)
		req.NoError(t, err, "round %d", i)
		playSession(t, r1, id, 2)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for k, r := range []*checkpoint.Sessions{r1, r2} {
			wg.Add(1)
			go func() { defer wg.Done(); <-start; errs[k] = r.Delete(ctx, id) }()
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil && !errors.Is(err, checkpoint.ErrNotFound) && !errors.Is(err, checkpoint.ErrLocked) {
				t.Fatalf("round %d: the Delete that lost the race failed with neither ErrNotFound nor ErrLocked: %v", i, err)
			}
		}
		req.False(t, errs[0] != nil && errs[1] != nil, "round %d: one Delete removes it: %v", i, errs)
		_, err = r1.Get(ctx, id)
		req.ErrorIs(t, err, checkpoint.ErrNotFound, "round %d", i)
		_, err = r2.Create(ctx, id, nil)
		req.NoError(t, err, "round %d: once Delete returned nil the ID is free", i)
		req.NoError(t, r2.Delete(ctx, id), "round %d", i)
	}
}
