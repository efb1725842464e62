package backendtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// The cases of RunSessions for Delete and PruneIdle.

func testBackendDeleteRemovesEverything(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	played := newPlayedSession(t, r, 4)
	_, err := r.Create(ctx, "other", nil)
	req.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, played.ID)
	req.NoError(t, err)
	req.NoError(t, st.WriteJSON(ctx, "notes.json", map[string]int{"a": 1}))
	req.NoError(t, st.Close())
	req.NoError(t, r.SetMeta(ctx, played.ID, map[string]string{"k": "v"}))

	req.NoError(t, r.Delete(ctx, played.ID))
	req.Equal(t, []string{"other"}, listedIDs(t, r), "a deleted session is listed no more")
	_, err = r.Get(ctx, played.ID)
	req.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = checkpoint.OpenSessionStore[int](r, played.ID)
	req.ErrorIs(t, err, checkpoint.ErrNotFound)
	// Every object of the session is gone, hidden ones included (a
	// backend's own, such as an object storage's released lease, which
	// List leaves out, may stay; a directory's lock file goes).
	req.Empty(t, objectNames(t, w.child(t, played.ID), true), "objects left")

	err = r.Delete(ctx, played.ID)
	req.ErrorIs(t, err, checkpoint.ErrNotFound, "deleting it again")
	req.Contains(t, err.Error(), "delete session")
	req.ErrorIs(t, r.Delete(ctx, "never"), checkpoint.ErrNotFound)
	for _, id := range []string{"", "\xff"} { // invalid under any naming
		req.ErrorIs(t, r.Delete(ctx, id), checkpoint.ErrInvalid, "%q", id)
	}
	req.ErrorIs(t, w.open(t, checkpoint.ReadOnly()).Delete(ctx, "other"), checkpoint.ErrReadOnly)

	// The ID is free again, and the new session starts empty.
	s, err := r.Create(ctx, played.ID, nil)
	req.NoError(t, err, "create after delete")
	req.Equal(t, 0, s.Checkpoints)
	req.Zero(t, s.Parent)
}

func testBackendDeleteWhileWriterIsLocked(t *testing.T, w workers) {
	ctx := context.Background()
	r1, r2 := w.open(t), w.open(t)
	s := newPlayedSession(t, r1, 3)
	st, err := checkpoint.OpenSessionStore[int](r1, s.ID)
	req.NoError(t, err)
	for _, r := range []*checkpoint.Sessions{r1, r2} {
		req.ErrorIs(t, r.Delete(ctx, s.ID), checkpoint.ErrLocked, "a writer holds the session")
		idle, err := r.PruneIdle(ctx, 0)
		req.NoError(t, err)
		req.Empty(t, idle, "PruneIdle skips a session a writer holds")
	}
	got, err := r2.Get(ctx, s.ID)
	req.NoError(t, err, "the session is whole")
	req.Equal(t, 3, got.Checkpoints)
	_, err = st.Save(ctx, 4, 40)
	req.NoError(t, err, "the writer goes on")
	req.NoError(t, st.Close())
	st2, err := checkpoint.OpenSessionStore[int](r2, s.ID)
	req.NoError(t, err, "no Delete left the lock behind")
	req.NoError(t, st2.Close())
	req.NoError(t, r2.Delete(ctx, s.ID), "once the writer closed")
	req.Empty(t, listedIDs(t, r1))
}

// testBackendDeleteRacesWriterOpening runs a Delete and a writer's opening
// of one session at once, from two workers, many times: either the
// session is deleted and the opening fails with ErrNotFound, or the Delete
// fails with ErrLocked and the session is whole.
func testBackendDeleteRacesWriterOpening(t *testing.T, w workers) {
	ctx := context.Background()
	r1, r2 := w.open(t), w.open(t)
	outcomes := map[string]int{}
	for i := range 30 {
		s := newPlayedSession(t, r1, 2)
		var wg sync.WaitGroup
		var delErr, openErr error
		var st *checkpoint.Store[int]
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			delErr = r1.Delete(ctx, s.ID)
		}()
		go func() {
			defer wg.Done()
			<-start
			st, openErr = checkpoint.OpenSessionStore[int](r2, s.ID)
		}()
		close(start)
		wg.Wait()
		switch {
		case delErr == nil:
			req.ErrorIs(t, openErr, checkpoint.ErrNotFound, "round %d: the session was deleted", i)
			_, err := r2.Get(ctx, s.ID)
			req.ErrorIs(t, err, checkpoint.ErrNotFound, "round %d", i)
			outcomes["deleted"]++
		case errors.Is(delErr, checkpoint.ErrLocked):
			req.NoError(t, openErr, "round %d: the Delete was refused", i)
			_, err := st.Save(ctx, 3, 30)
			req.NoError(t, err, "round %d: the writer saves", i)
			req.NoError(t, st.Close())
			got, err := r1.Get(ctx, s.ID)
			req.NoError(t, err, "round %d: the session is whole", i)
			req.Equal(t, 3, got.Checkpoints, "round %d", i)
			outcomes["locked"]++
		default:
			t.Fatalf("round %d: Delete: %v; open: %v", i, delErr, openErr)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

func testBackendInterruptedDeleteIsHiddenAndFinished(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	for _, finish := range []string{"Delete", "RemoveStaging", "PruneIdle"} {
		s := newPlayedSession(t, r, 3)
		w.hooks.setFailRemove(true)
		err := r.Delete(ctx, s.ID)
		w.hooks.setFailRemove(false)
		req.ErrorIs(t, err, errInjected, finish)
		_, err = r.Get(ctx, s.ID)
		req.ErrorIs(t, err, checkpoint.ErrNotFound, "%s: a session whose deletion began is never listed again", finish)
		req.False(t, slices.Contains(listedIDs(t, r), s.ID), finish)
		_, err = checkpoint.OpenSessionStore[int](r, s.ID)
		req.ErrorIs(t, err, checkpoint.ErrNotFound, finish)
		_, err = r.Create(ctx, s.ID, nil)
		req.ErrorIs(t, err, checkpoint.ErrExists, "%s: a creation never reuses half-deleted leftovers", finish)
		req.NotEmpty(t, objectNames(t, w.child(t, s.ID), false), "%s: checkpoints left", finish)
		switch finish {
		case "Delete":
			req.NoError(t, r.Delete(ctx, s.ID), "the next Delete finishes the deletion")
		case "RemoveStaging":
			removed, err := r.RemoveStaging(ctx)
			req.NoError(t, err)
			req.Len(t, removed, 1, "%v", removed)
		case "PruneIdle":
			_, err := r.PruneIdle(ctx, time.Hour)
			req.NoError(t, err)
		}
		req.Empty(t, objectNames(t, w.child(t, s.ID), true), "%s: every object is gone", finish)
		_, err = r.Create(ctx, s.ID, nil)
		req.NoError(t, err, "%s: the ID is free again", finish)
		req.NoError(t, r.Delete(ctx, s.ID))
	}
}

func testBackendDeleteDamagedSession(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	s := newPlayedSession(t, r, 2)
	_, err := w.child(t, s.ID).Remove(ctx, "session.json")
	req.NoError(t, err)
	_, err = r.Get(ctx, s.ID)
	req.ErrorIs(t, err, checkpoint.ErrCorrupt)
	idle, err := r.Idle(ctx, 0)
	req.NoError(t, err)
	req.Empty(t, idle, "a damaged session is never listed as idle")
	removed, err := r.PruneIdle(ctx, 0)
	req.NoError(t, err)
	req.Empty(t, removed, "a damaged session is never pruned")
	req.NoError(t, r.Delete(ctx, s.ID), "Delete removes a damaged session when asked")
	req.Empty(t, objectNames(t, w.child(t, s.ID), true))
	req.Empty(t, listedIDs(t, r))
}

// waitPast waits until the clock is past every session's last activity,
// so that PruneIdle(ctx, 0) takes them for idle (a coarse clock may not
// have ticked since the last save).
func waitPast(t *testing.T, r *checkpoint.Sessions) {
	t.Helper()
	list, err := r.List(context.Background())
	req.NoError(t, err)
	var newest time.Time
	for _, s := range list {
		if s.Active().After(newest) {
			newest = s.Active()
		}
	}
	for deadline := time.Now().Add(5 * time.Second); !time.Now().After(newest); {
		if time.Now().After(deadline) {
			t.Fatalf("the clock stays before %v", newest)
		}
		time.Sleep(time.Millisecond)
	}
}

func testBackendPruneIdleSkipsHeldAndPinned(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	for _, id := range []string{"idle", "held", "pinned"} {
		_, err := r.Create(ctx, id, nil)
		req.NoError(t, err)
		playSession(t, r, id, 3)
	}
	req.NoError(t, r.SetMeta(ctx, "pinned", map[string]string{checkpoint.PinMeta: "keep"}))
	st, err := checkpoint.OpenSessionStore[int](w.open(t), "held")
	req.NoError(t, err)
	defer st.Close()

	removed, err := r.PruneIdle(ctx, time.Hour)
	req.NoError(t, err)
	req.Empty(t, removed, "nothing is idle for an hour")
	waitPast(t, r)
	dry, err := r.Idle(ctx, 0)
	req.NoError(t, err)
	var dryIDs []string
	for _, s := range dry {
		dryIDs = append(dryIDs, s.ID)
	}
	slices.Sort(dryIDs)
	req.Equal(t, []string{"held", "idle"}, dryIDs, "the dry run lists all but the pinned one")
	req.Equal(t, []string{"held", "idle", "pinned"}, listedIDs(t, r), "a dry run removes nothing")

	removed, err = r.PruneIdle(ctx, 0)
	req.NoError(t, err)
	req.Equal(t, []string{"idle"}, removed)
	req.Equal(t, []string{"held", "pinned"}, listedIDs(t, r))
	_, err = st.Save(ctx, 4, 40)
	req.NoError(t, err, "the writer of a skipped session goes on")

	_, err = r.PruneIdle(ctx, -time.Second)
	req.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = w.open(t, checkpoint.ReadOnly()).PruneIdle(ctx, 0)
	req.ErrorIs(t, err, checkpoint.ErrReadOnly)
}
