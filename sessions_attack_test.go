package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
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

// Two Deletes of one session at once: see the backendtest case
// ConcurrentDeletesOfOneIDFailCleanly (fails on the directory backend).

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
