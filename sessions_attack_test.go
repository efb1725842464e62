package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// Attacks on Delete and PruneIdle (issue 23) that break a documented
// promise today.

// playSessionSteps saves the steps 1 to n in the session id.
func playSessionSteps(t *testing.T, r *checkpoint.Sessions, id string, n int64) {
	t.Helper()
	st, err := checkpoint.OpenSessionStore[int](r, id)
	require.NoError(t, err)
	for i := int64(1); i <= n; i++ {
		_, err := st.Save(context.Background(), i, int(i))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
}

// Two Deletes of one session at once (two processes running `checkpoint
// sessions rm`, or PruneIdle beside an rm): Delete promises that "a
// missing session is ErrNotFound" and that a writer's lock is ErrLocked,
// so the one that loses must fail with one of those, never with a raw
// file-system error. Today the loser, when the winner removed the
// directory between its read of session.json and its write of the
// deletion marker (session_delete.go, delete: sub.Replace(deleteMarker)),
// returns "publish: renameat ..session.delete.ckpt-tmp-... .session.delete:
// no such file or directory", which wraps neither.
func TestConcurrentDeletesOfOneSessionLoseWithErrNotFound(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r1 := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	r2 := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	for i := range 150 {
		id := fmt.Sprintf("user:1/thread#%d", i)
		_, err := r1.Create(ctx, id, nil)
		require.NoError(t, err, "round %d", i)
		playSessionSteps(t, r1, id, 2)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for k, r := range []*checkpoint.Sessions{r1, r2} {
			wg.Add(1)
			go func() { defer wg.Done(); <-start; errs[k] = r.Delete(ctx, id) }()
		}
		close(start)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, checkpoint.ErrNotFound), errors.Is(err, checkpoint.ErrLocked):
			default:
				t.Fatalf("round %d: the Delete that lost the race failed with neither ErrNotFound nor ErrLocked: %v", i, err)
			}
		}
		require.GreaterOrEqual(t, ok, 1, "round %d: %v", i, errs)
		_, err = r1.Get(ctx, id)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, "round %d", i)
	}
}

// notAFile replaces the session.json of the session id by a named pipe
// or a directory: a damaged session, which List shows with Err set.
func notAFile(t *testing.T, r *checkpoint.Sessions, id, kind string) {
	t.Helper()
	s, err := r.Get(context.Background(), id)
	require.NoError(t, err)
	p := filepath.Join(s.Dir, "session.json")
	require.NoError(t, os.Remove(p))
	if kind == "fifo" {
		require.NoError(t, syscall.Mkfifo(p, 0o644))
	} else {
		require.NoError(t, os.Mkdir(p, 0o755))
	}
	list, err := r.List(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.ErrorIs(t, list[0].Err, checkpoint.ErrCorrupt, "listed as a damaged session")
}

// Delete promises: "A damaged session (one with checkpoints but no valid
// session.json, which List shows with Err set) is removed as well." A
// session whose session.json is a named pipe or a directory is listed
// damaged (ErrCorrupt), yet Delete fails with ErrConflict ("session.json
// was changed since the store last saw it"), after 8 attempts, and leaves
// it: readMetaIn returns ErrCorrupt with an empty Version for a
// non-regular session.json, so delete entombs with NoObject
// (session_delete.go, delete: case errors.Is(err, ErrCorrupt)), which can
// never match an object that exists.
func TestDeleteRemovesADamagedSessionWhoseSessionJSONIsNotAFile(t *testing.T) {
	for _, kind := range []string{"fifo", "dir"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
			_, err := r.Create(ctx, "user:7", nil)
			require.NoError(t, err)
			playSessionSteps(t, r, "user:7", 1)
			notAFile(t, r, "user:7", kind)
			require.NoError(t, r.Delete(ctx, "user:7"), "Delete removes a damaged session")
			require.Empty(t, dirNames(t, dir))
		})
	}
}

// PruneIdle promises to skip a damaged session "without" removing it
// (it "cannot be dated with certainty and is never removed unasked"),
// and Idle, its dry run, lists nothing and returns nil. With a session
// whose session.json is a named pipe or a directory, PruneIdle fails
// instead, on every run, so `checkpoint sessions prune` exits with an
// error forever while Idle (--dry-run) says all is well: finishDeletions
// (session_delete.go) reports the ErrNotRegular of deletedIn's Open for
// every child, where RemoveStaging's abandon leaves a damaged session
// alone.
func TestPruneIdleSkipsADamagedSessionWhoseSessionJSONIsNotAFile(t *testing.T) {
	for _, kind := range []string{"fifo", "dir"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
			_, err := r.Create(ctx, "user:7", nil)
			require.NoError(t, err)
			playSessionSteps(t, r, "user:7", 1)
			notAFile(t, r, "user:7", kind)
			idle, err := r.Idle(ctx, 0)
			require.NoError(t, err)
			require.Empty(t, idle)
			removed, err := r.PruneIdle(ctx, 0)
			require.NoError(t, err, "PruneIdle skips a damaged session")
			require.Empty(t, removed)
		})
	}
}
