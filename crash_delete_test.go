package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/stretchr/testify/require"
)

// The kill tests of Delete and PruneIdle: a child deletes sessions of
// hundreds of checkpoints each and is killed mid-way.

const (
	deleteKillSessions    = 4
	deleteKillCheckpoints = 200
)

// deleteSessionsRole runs deleteSessionsChild on the root Args[0], in the
// mode Args[1]: "delete" or "prune".
var deleteSessionsRole = killtest.Register("delete-sessions", deleteSessionsChild)

// deleteSessionsChild deletes every session of the root, one Delete each,
// printing "deleting ID" before and acknowledging the ID after each; or, in
// mode "prune", prints "pruning" and runs one PruneIdle(0), then
// acknowledges each ID it removed. Done, it waits to be killed.
func deleteSessionsChild(c *killtest.Child) int {
	dir, mode, fail := c.Args[0], c.Args[1], c.Fail
	ctx := context.Background()
	r, err := OpenSessions(dir, NoSync())
	if err != nil {
		fail(2, err)
	}
	if mode == "prune" {
		c.Printf("pruning")
		removed, err := r.PruneIdle(ctx, 0)
		if err != nil {
			fail(3, err)
		}
		for _, id := range removed {
			c.Ack(id)
		}
		<-c.Stopping() // done: wait for the kill
		return 0
	}
	list, err := r.List(ctx)
	if err != nil {
		fail(4, err)
	}
	for _, s := range list {
		if s.Pinned() {
			continue // Delete would remove it: the test keeps it
		}
		c.Printf("deleting %s", s.ID)
		if err := r.Delete(ctx, s.ID); err != nil {
			fail(5, err)
		}
		c.Ack(s.ID)
	}
	<-c.Stopping() // done: wait for the kill
	return 0
}

// makeDeletionRoot makes a root in dir with deleteKillSessions sessions of
// deleteKillCheckpoints checkpoints each (without syncing: the child's
// deletion is the point), and a pinned one, "pinned", of a few; it returns
// the IDs of the others.
func makeDeletionRoot(t *testing.T, dir string) []string {
	t.Helper()
	ctx := context.Background()
	r, err := OpenSessions(dir, NoSync())
	require.NoError(t, err)
	defer r.Close()
	var ids []string
	for i := range deleteKillSessions + 1 {
		id := fmt.Sprintf("s%d", i)
		n := deleteKillCheckpoints
		if i == deleteKillSessions {
			id, n = "pinned", 3
		}
		_, err := r.Create(ctx, id, map[string]string{PinMeta: map[bool]string{true: "yes"}[id == "pinned"]})
		require.NoError(t, err)
		st, err := OpenSessionStore[int](r, id)
		require.NoError(t, err)
		for step := int64(1); step <= int64(n); step++ {
			_, err := st.Save(ctx, step, int(step))
			require.NoError(t, err)
		}
		require.NoError(t, st.WriteJSON(ctx, "notes.json", id))
		require.NoError(t, st.Close())
		if id != "pinned" {
			ids = append(ids, id)
		}
	}
	return ids
}

// checkDeletionAfterKill checks the root dir after a kill: every session
// listed is whole, none acknowledged as deleted is listed, the pinned one
// stays; then that the next Delete of each ID no longer listed and the
// next PruneIdle remove what the kill left, after which the ID is free.
func checkDeletionAfterKill(t *testing.T, dir string, kill int, ids []string, acked map[string]bool) (leftovers int) {
	t.Helper()
	ctx := context.Background()
	r, err := OpenSessions(dir, NoSync())
	require.NoError(t, err)
	defer r.Close()
	list, err := r.List(ctx)
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, s := range list {
		listed[s.ID] = true
		require.NoError(t, s.Err, "kill %d: session %s", kill, s.ID)
		want := deleteKillCheckpoints
		if s.ID == "pinned" {
			want = 3
		}
		require.Equal(t, want, s.Checkpoints, "kill %d: session %s is listed half-deleted", kill, s.ID)
		require.False(t, acked[s.ID], "kill %d: session %s was deleted and is listed", kill, s.ID)
	}
	require.True(t, listed["pinned"], "kill %d: the pinned session is gone", kill)
	for _, id := range ids {
		if listed[id] {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, id, sessionFile)); err == nil {
			leftovers++
			// The ID is not reused while the tombstone is there.
			_, err := r.Create(ctx, id, nil)
			require.ErrorIs(t, err, ErrExists, "kill %d: %s", kill, id)
		} else if _, err := os.Stat(filepath.Join(dir, id)); err == nil {
			// Hidden objects only (a lock file): no session, and the ID
			// is free.
			_, err := r.Create(ctx, id, nil)
			require.NoError(t, err, "kill %d: %s", kill, id)
		}
		err := r.Delete(ctx, id)
		if err != nil {
			require.ErrorIs(t, err, ErrNotFound, "kill %d: Delete(%s) after the kill", kill, id)
		}
		_, err = os.Stat(filepath.Join(dir, id))
		require.True(t, errors.Is(err, os.ErrNotExist), "kill %d: %s is still there after the next Delete: %v", kill, id, err)
	}
	removed, err := r.PruneIdle(ctx, 0)
	require.NoError(t, err)
	for _, id := range removed {
		require.True(t, listed[id], "kill %d: PruneIdle reports %s, which was not listed", kill, id)
	}
	require.Equal(t, []string{"pinned"}, dirNames(t, dir), "kill %d: all but the pinned session are gone", kill)
	return leftovers
}

// awaitDeletionBegun waits until the deletion of the session id has begun
// (its session.json is a tombstone, or gone), or until a second has
// passed: the child may delete it after the kill, or may have deleted it.
func awaitDeletionBegun(t *testing.T, dir, id string) {
	t.Helper()
	path := filepath.Join(dir, id, sessionFile)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		data, err := os.ReadFile(path)
		if err != nil || strings.Contains(string(data), abandonedDeleted) {
			return
		}
	}
}

// TestKill9DuringDeleteAndPruneIdleLeavesNoHalfSession kills a process
// that deletes sessions of hundreds of checkpoints each, with Delete and
// with PruneIdle, and proves that a session is listed whole or not at all,
// that one whose deletion returned is gone, and that the next Delete and
// PruneIdle remove what the dead process left.
func TestKill9DuringDeleteAndPruneIdleLeavesNoHalfSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, mode := range []string{"delete", "prune"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 23))
			kills := killtest.Kills(t, 6)
			leftovers := 0
			for kill := range kills {
				dir := filepath.Join(t.TempDir(), "root")
				ids := makeDeletionRoot(t, dir)
				p := deleteSessionsRole.Start(t, dir, mode)
				acked := map[string]bool{}
				lines := 1
				if mode == "delete" {
					lines = 1 + rng.IntN(2*deleteKillSessions-1)
				}
				for _, line := range p.Await(t, "", lines) {
					if id, ok := killtest.Acked(line); ok {
						acked[id] = true
					}
				}
				if rng.IntN(3) > 0 {
					// Kill it mid-deletion: once a session's deletion has
					// begun.
					awaitDeletionBegun(t, dir, ids[rng.IntN(len(ids))])
				}
				p.Kill(t)
				require.Empty(t, p.Stderr(), "the child failed before it was killed")
				for _, id := range p.Acks() {
					acked[id] = true
				}
				leftovers += checkDeletionAfterKill(t, dir, kill, ids, acked)
			}
			t.Logf("%d kills, %d half-deleted sessions left out of sight and removed by the next Delete", kills, leftovers)
		})
	}
}
