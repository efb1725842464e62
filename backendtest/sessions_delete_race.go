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

// testBackendCreateRacingDeleteOfTheSameID runs Delete of a session and
// Create of the same ID at once, from two workers, many times. Create
// either fails with ErrExists (the deletion was under way) or returns the
// new session, which stays: Get finds it and a writer opens it. No other
// error: Create's failures are ErrExists, ErrInvalid.
func testBackendCreateRacingDeleteOfTheSameID(t *testing.T, w workers) {
	ctx := context.Background()
	r1, r2 := w.open(t), w.open(t)
	outcomes := map[string]int{}
	for i := range 60 {
		id := fmt.Sprintf("run %d", i)
		_, err := r1.Create(ctx, id, nil)
		req.NoError(t, err, "round %d", i)
		playSession(t, r1, id, 2)
		var wg sync.WaitGroup
		var delErr, createErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; delErr = r1.Delete(ctx, id) }()
		go func() { defer wg.Done(); <-start; _, createErr = r2.Create(ctx, id, map[string]string{"new": "yes"}) }()
		close(start)
		wg.Wait()
		req.NoError(t, delErr, "round %d", i)
		switch {
		case createErr == nil:
			s, err := r1.Get(ctx, id)
			req.NoError(t, err, "round %d: the session Create returned stays", i)
			req.Equal(t, "yes", s.Meta["new"], "round %d", i)
			req.Equal(t, 0, s.Checkpoints, "round %d: nothing of the deleted session", i)
			playSession(t, r2, id, 1)
			req.NoError(t, r2.Delete(ctx, id), "round %d", i)
			outcomes["created"]++
		case errors.Is(createErr, checkpoint.ErrExists):
			_, err := r1.Get(ctx, id)
			req.ErrorIs(t, err, checkpoint.ErrNotFound, "round %d", i)
			_, err = r2.Create(ctx, id, nil)
			req.NoError(t, err, "round %d: once Delete returned nil the ID is free", i)
			req.NoError(t, r2.Delete(ctx, id), "round %d", i)
			outcomes["exists"]++
		default:
			t.Fatalf("round %d: Create beside a Delete failed with neither ErrExists nor success: %v", i, createErr)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
