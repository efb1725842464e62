package checkpoint_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
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

// replaceHook is a Backend whose child stores call before each Replace of
// an object on them.
type replaceHook struct {
	checkpoint.Backend
	before func(child, name string)
	child  string
}

func (b *replaceHook) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	sub, err := b.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return &replaceHook{Backend: sub, before: b.before, child: name}, nil
}

func (b *replaceHook) Replace(ctx context.Context, name, ifVersion string, w func(io.Writer) error) (checkpoint.Object, error) {
	if b.child != "" {
		b.before(b.child, name)
	}
	return b.Backend.Replace(ctx, name, ifVersion, w)
}

// PinMeta promises: "PruneIdle never removes ... a session whose Meta
// holds a non-empty value under it", and PruneIdle that "a session saved
// to after Idle listed it stays" (idleness is checked again under the
// lock). SetMeta takes no lock, so a SetMeta that pins the session (or
// makes it active) after PruneIdle's check under the lock and before its
// tombstone makes the tombstone's conditional Replace fail with
// ErrConflict; entomb (session_delete.go) then reads session.json again
// and entombs the new version without asking keep again: the session,
// pinned by a SetMeta that returned nil before the deletion began, is
// removed.
func TestPruneIdleNeverRemovesASessionPinnedBeforeItsDeletionBegan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	clock := &manualClock{t: start}
	dir := t.TempDir()
	other := openSessions(t, dir, checkpoint.WithClock(clock.now)) // another process
	pinned := false
	var pinErr error
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	hooked := &replaceHook{Backend: b, before: func(child, name string) {
		if name == "session.json" && !pinned {
			pinned = true
			pinErr = other.SetMeta(ctx, "keep", map[string]string{checkpoint.PinMeta: "the record run"})
		}
	}}
	r, err := checkpoint.OpenSessionsBackend(hooked, checkpoint.NoSync(), checkpoint.WithClock(clock.now))
	require.NoError(t, err)
	defer r.Close()
	_, err = other.Create(ctx, "keep", nil)
	require.NoError(t, err)
	clock.set(start.Add(48 * time.Hour))
	removed, err := r.PruneIdle(ctx, 24*time.Hour)
	require.True(t, pinned)
	require.NoError(t, pinErr, "the pin was set before the deletion began")
	require.NoError(t, err)
	require.Empty(t, removed, "a pinned session is never removed")
	s, err := other.Get(ctx, "keep")
	require.NoError(t, err, "the pinned session stays")
	require.True(t, s.Pinned())
}

// watchHook is a Backend whose child stores call after each Stat.
type watchHook struct {
	checkpoint.Backend
	afterStat func(name string)
	child     bool
}

func (b *watchHook) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	sub, err := b.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return &watchHook{Backend: sub, afterStat: b.afterStat, child: true}, nil
}

func (b *watchHook) Stat(ctx context.Context, name string) (checkpoint.Object, error) {
	o, err := b.Backend.Stat(ctx, name)
	if b.child {
		b.afterStat(name)
	}
	return o, err
}

// OpenSessionStore promises: "A session that Delete removes while it
// opens is ErrNotFound: if a Delete of the session holds its lock, it
// waits ... for that Delete to remove it", and Delete that a writer
// opening meanwhile "either opens it before Delete starts ... or fails
// with ErrNotFound". With a second Delete of the same session (two `rm`s,
// or an rm beside PruneIdle), the second fails with ErrLocked and removes
// the deletion marker, which is the first Delete's own (delete in
// session_delete.go: "Its own marker, or a later Delete's": one name for
// every Delete). A writer opening then finds the lock held and no marker,
// takes the deleter for a writer and returns ErrLocked, and the session is
// deleted right after: the writer is told to wait for a writer that does
// not exist, for a session that is gone.
func TestOpenBesideTwoDeletesIsErrNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	second := openSessions(t, dir) // the second Delete's process
	_, err := second.Create(ctx, "s", nil)
	require.NoError(t, err)
	playSessionSteps(t, second, "s", 1)

	// The writer's process, which reports when it looked for the marker.
	looked := make(chan struct{}, 1)
	wb, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	writer, err := checkpoint.OpenSessionsBackend(&watchHook{Backend: wb, afterStat: func(name string) {
		if name == ".session.delete" {
			select {
			case looked <- struct{}{}:
			default:
			}
		}
	}}, checkpoint.NoSync())
	require.NoError(t, err)
	defer writer.Close()

	var openErr, secondErr error
	done := make(chan struct{})
	once := false
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	first, err := checkpoint.OpenSessionsBackend(&replaceHook{Backend: b, before: func(child, name string) {
		if name != "session.json" || once {
			return
		}
		once = true
		// The first Delete holds the session's lock, its tombstone not
		// written yet.
		secondErr = second.Delete(ctx, "s")
		go func() {
			defer close(done)
			var st *checkpoint.Store[int]
			st, openErr = checkpoint.OpenSessionStore[int](writer, "s")
			if st != nil {
				st.Close()
			}
		}()
		<-looked
	}}, checkpoint.NoSync())
	require.NoError(t, err)
	defer first.Close()

	require.NoError(t, first.Delete(ctx, "s"))
	<-done
	require.True(t, once)
	require.ErrorIs(t, secondErr, checkpoint.ErrLocked, "the first Delete holds the lock")
	_, err = second.Get(ctx, "s")
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "the session is gone")
	require.ErrorIs(t, openErr, checkpoint.ErrNotFound, "an opening beside the Delete that removed the session")
}

// ValidSessionID promises: "The session's session.json records the ID,
// and every read checks that it maps to the name it was read from: a
// directory copied there by hand is a damaged session, never another
// ID's." A mapped session's directory ("user:1") renamed or copied by hand
// to a name that is its own ID ("foo") is listed, and Get, as the healthy
// session "foo" holding user:1's Meta and checkpoints: checkID
// (session_protocol.go) checks nothing under a Legacy name, though the
// recorded ID "user:1" is no ID an earlier release could have written
// there (they took Legacy IDs only). Low severity: a hand-made state, but
// in a root keyed by user or thread ID one user's state is served as
// another's without an error.
func TestSessionDirectoryRenamedToAnotherIDIsDamaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	s, err := r.Create(ctx, "user:1", map[string]string{"owner": "alice"})
	require.NoError(t, err)
	playSessionSteps(t, r, "user:1", 2)
	require.NoError(t, os.Rename(s.Dir, filepath.Join(dir, "foo")))
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.ErrorIs(t, list[0].Err, checkpoint.ErrCorrupt, "user:1's session under the name of foo is damaged, not foo's")
	_, err = r.Get(ctx, "foo")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
}
