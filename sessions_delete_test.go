package checkpoint_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/stretchr/testify/require"
)

// Deleting and expiring sessions in a directory. The same behaviour on
// every backend is checked by backendtest.RunSessions
// (TestDirectoryBackendPassesTheSessionsSuite); a crash in the middle, by
// TestPowerCutKeepsDeletePromises (backendtest) and
// TestKill9DuringDeleteAndPruneIdleLeavesNoHalfSession.

// A session's idleness is counted from its last activity: its last save,
// or its creation or metadata change if later. PruneIdle removes the
// sessions idle for longer than idle (not those idle exactly that long),
// never a pinned one, and Idle lists the same, least recently active
// first, removing nothing.
func TestPruneIdleCountsFromTheLastActivity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	start := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	clock := &manualClock{t: start}
	at := func(h int) { clock.set(start.Add(time.Duration(h) * time.Hour)) }
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3), checkpoint.WithClock(clock.now))
	for i, id := range []string{"created", "saved", "meta", "pinned"} {
		at(i)
		_, err := r.Create(ctx, id, nil)
		require.NoError(t, err)
	}
	at(10)
	st, err := checkpoint.OpenSessionStore[int](r, "saved")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	at(20)
	require.NoError(t, r.SetMeta(ctx, "meta", map[string]string{"k": "v"}))
	require.NoError(t, r.SetMeta(ctx, "pinned", map[string]string{checkpoint.PinMeta: "the record run"}))

	// At hour 30: "created" has been idle 30h, "saved" 20h, "meta" and
	// "pinned" 10h.
	at(30)
	idleIDs := func(d time.Duration) []string {
		list, err := r.Idle(ctx, d)
		require.NoError(t, err)
		var ids []string
		for _, s := range list {
			ids = append(ids, s.ID)
		}
		return ids
	}
	require.Empty(t, idleIDs(30*time.Hour), "idle exactly 30h is not idle for longer")
	require.Equal(t, []string{"created"}, idleIDs(25*time.Hour))
	require.Equal(t, []string{"created", "saved"}, idleIDs(15*time.Hour), "the least recently active first")
	require.Equal(t, []string{"created", "saved", "meta"}, idleIDs(0), "never the pinned one")
	require.Len(t, listedSessionIDs(t, r), 4, "Idle removes nothing")

	removed, err := r.PruneIdle(ctx, 15*time.Hour)
	require.NoError(t, err)
	require.Equal(t, []string{"created", "saved"}, removed)
	require.ElementsMatch(t, []string{"meta", "pinned"}, listedSessionIDs(t, r))
	require.NoDirExists(t, filepath.Join(dir, "created"))
	require.NoDirExists(t, filepath.Join(dir, "saved"))

	// Unpinned, it expires as any other.
	require.NoError(t, r.SetMeta(ctx, "pinned", nil))
	at(100)
	removed, err = r.PruneIdle(ctx, time.Hour)
	require.NoError(t, err)
	require.Equal(t, []string{"meta", "pinned"}, removed)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing is left of the removed sessions")
}

// Delete wraps ErrNotFound, ErrInvalid, ErrLocked and ErrReadOnly and
// names the operation and the session.
func TestDeleteErrorsNameTheSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	err := r.Delete(ctx, "ghost")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.EqualError(t, err, `checkpoint: delete session `+filepath.Join(dir, "ghost")+`: checkpoint not found: no session "ghost"`)
	require.ErrorIs(t, r.Delete(ctx, ""), checkpoint.ErrInvalid)

	_, err = r.Create(ctx, "held", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, "held")
	require.NoError(t, err)
	err = r.Delete(ctx, "held")
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.Contains(t, err.Error(), "delete session "+filepath.Join(dir, "held"))
	require.NoError(t, st.Close())

	// A file where a session's directory would be is no session, and is
	// left alone.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644))
	require.ErrorIs(t, r.Delete(ctx, "file"), checkpoint.ErrNotFound)
	require.FileExists(t, filepath.Join(dir, "file"))

	_, err = r.PruneIdle(ctx, -time.Nanosecond)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = r.Idle(ctx, -time.Nanosecond)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}

// A root written by an earlier release (its staging directories and lock
// file) deletes and expires its sessions the same way, and leaves its
// legacy leftovers to RemoveStaging.
func TestDeleteInARootOfAnEarlierRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, s.ID)
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".sessions.lock"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".staging-ABC", "001"), 0o755))

	require.NoError(t, r.Delete(ctx, s.ID))
	require.NoDirExists(t, filepath.Join(dir, s.ID))
	require.Empty(t, listedSessionIDs(t, r))
	removed, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, ".staging-ABC")}, removed)
}

// The marker a Delete killed before it took the session's lock leaves
// (.session.delete) does not make a writer opening the session beside a
// running one wait: once it is older than a minute it is ignored, and
// RemoveStaging removes it.
func TestStaleDeleteMarkerIsIgnoredAndRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	_, err := r.Create(ctx, "s", nil)
	require.NoError(t, err)
	marker := filepath.Join(dir, "s", ".session.delete")
	require.NoError(t, os.WriteFile(marker, []byte(`{"op":"delete"}`), 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(marker, old, old))
	st, err := checkpoint.OpenSessionStore[int](r, "s")
	require.NoError(t, err)
	defer st.Close()

	begin := time.Now()
	_, err = checkpoint.OpenSessionStore[int](r, "s")
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.Less(t, time.Since(begin), 5*time.Second, "it waited for a Delete that is not there")
	_, err = r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.NoFileExists(t, marker)
	_, err = r.Get(ctx, "s")
	require.NoError(t, err, "the session is whole")
}

// lockHook is a Backend whose child stores call before each Lock (a
// deletion's, or a writer's) taken on them.
type lockHook struct {
	checkpoint.Backend
	before func(child string)
	child  string
}

func (b *lockHook) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	sub, err := b.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return &lockHook{Backend: sub, before: b.before, child: name}, nil
}

func (b *lockHook) Lock(ctx context.Context) (func() error, error) {
	if b.child != "" {
		b.before(b.child)
	}
	return b.Backend.Lock(ctx)
}

// PruneIdle checks a session's idleness again once it holds its lock: a
// session active between the listing and the deletion (a SetMeta, a
// writer that saved and closed) stays.
func TestPruneIdleChecksIdlenessAgainUnderTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	clock := &manualClock{t: start}
	var r *checkpoint.Sessions
	touched := false
	dir, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
	require.NoError(t, err)
	b := &lockHook{Backend: dir, before: func(child string) {
		if child == "busy" && !touched {
			touched = true
			require.NoError(t, r.SetMeta(ctx, "busy", map[string]string{"turn": "9"}))
		}
	}}
	r, err = checkpoint.OpenSessionsBackend(b, checkpoint.NoSync(), checkpoint.WithClock(clock.now))
	require.NoError(t, err)
	defer r.Close()
	for _, id := range []string{"busy", "quiet"} {
		_, err := r.Create(ctx, id, nil)
		require.NoError(t, err)
	}
	clock.set(start.Add(48 * time.Hour))
	removed, err := r.PruneIdle(ctx, 24*time.Hour)
	require.NoError(t, err)
	require.True(t, touched)
	require.Equal(t, []string{"quiet"}, removed, "busy became active under the lock")
	require.Equal(t, []string{"busy"}, listedSessionIDs(t, r))
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

// A SetMeta (which takes no lock) that pins a session after PruneIdle
// judged it under its lock, and before the tombstone replaces its
// session.json, keeps the session: the tombstone's conditional Replace
// fails, and PruneIdle judges the session again.
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

// notAFile replaces the session.json of the session id by a named pipe
// (where the platform has them) or a directory: a damaged session, which
// List shows with Err set.
func notAFile(t *testing.T, r *checkpoint.Sessions, id, kind string) {
	t.Helper()
	s, err := r.Get(context.Background(), id)
	require.NoError(t, err)
	p := filepath.Join(s.Dir, "session.json")
	require.NoError(t, os.Remove(p))
	if kind == "fifo" {
		mkfifo(t, p)
	} else {
		require.NoError(t, os.Mkdir(p, 0o755))
	}
	list, err := r.List(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.ErrorIs(t, list[0].Err, checkpoint.ErrCorrupt, "listed as a damaged session")
}

// PruneIdle skips a session whose session.json is a named pipe or a
// directory (damaged: it cannot be dated) without an error, as Idle does.
func TestPruneIdleSkipsADamagedSessionWhoseSessionJSONIsNotAFile(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"fifo", "dir"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
			_, err := r.Create(ctx, "user:7", nil)
			require.NoError(t, err)
			st, err := checkpoint.OpenSessionStore[int](r, "user:7")
			require.NoError(t, err)
			_, err = st.Save(ctx, 1, 1)
			require.NoError(t, err)
			require.NoError(t, st.Close())
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

// Delete by a stored name removes a damaged session whose ID is unknown,
// never a healthy session: its stored name is not its ID.
func TestDeleteByStoredNameRemovesOnlyADamagedSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	healthy, err := r.Create(ctx, "user:1", nil)
	require.NoError(t, err)
	playSessionSteps(t, r, "user:1", 1)
	require.ErrorIs(t, r.Delete(ctx, filepath.Base(healthy.Dir)), checkpoint.ErrNotFound)
	_, err = r.Get(ctx, "user:1")
	require.NoError(t, err, "a healthy session stays")

	damaged, err := r.Create(ctx, "user:2", nil)
	require.NoError(t, err)
	playSessionSteps(t, r, "user:2", 1)
	require.NoError(t, os.Remove(filepath.Join(damaged.Dir, "session.json")))
	require.NoError(t, r.Delete(ctx, filepath.Base(damaged.Dir)))
	require.NoDirExists(t, damaged.Dir)
	_, err = r.Get(ctx, "user:1")
	require.NoError(t, err)
}

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

// Delete removes a damaged session whose session.json is a named pipe or
// a directory (List shows it with Err set), without opening it.
func TestDeleteRemovesADamagedSessionWhoseSessionJSONIsNotAFile(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"fifo", "dir"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
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

// A session.json that is a directory holding files was made by hand:
// Delete leaves the session, and what the directory holds, and says so
// with an error wrapping ErrCorrupt that names it.
func TestDeleteLeavesASessionJSONDirectoryThatHoldsFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	s, err := r.Create(ctx, "user:7", nil)
	require.NoError(t, err)
	playSessionSteps(t, r, "user:7", 1)
	notAFile(t, r, "user:7", "dir")
	kept := filepath.Join(s.Dir, "session.json", "notes.txt")
	require.NoError(t, os.WriteFile(kept, []byte("mine"), 0o644))
	err = r.Delete(ctx, "user:7")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "session.json is a directory that is not empty")
	require.FileExists(t, kept)
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "still listed, as damaged")
	require.ErrorIs(t, list[0].Err, checkpoint.ErrCorrupt)
	require.Equal(t, 1, list[0].Checkpoints, "its checkpoints stay")
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

// A writer opening a session beside two Deletes of it (two rms, or an rm
// beside PruneIdle) gets ErrNotFound, as beside one: the Delete that loses
// the race for the lock leaves the winner's deletion marker, which tells
// the writer to wait for the outcome rather than take the deleter for a
// writer (ErrLocked).
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

// Delete by a stored name never removes a healthy session, even when a
// transient error (EIO, EMFILE, a 503 from object storage) keeps its
// checkpoints from being listed while Delete judges it under its lock:
// only a session whose session.json is damaged counts as of unknown ID.
func TestDeleteByStoredNameKeepsAHealthySessionOnATransientListError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	healthy, err := r.Create(ctx, "user:1", nil)
	require.NoError(t, err)
	playSessionSteps(t, r, "user:1", 3)

	d, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	var mu sync.Mutex
	locked, failed := false, false
	r2, err := checkpoint.OpenSessionsBackend(inject.Wrap(d, func(op inject.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if op.Store != healthy.Dir {
			return nil
		}
		if op.Kind == inject.Lock {
			locked = true
		}
		if locked && !failed && op.Kind == inject.List {
			failed = true
			return errInjected // one transient failure, under the lock
		}
		return nil
	}), checkpoint.NoSync(), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer r2.Close()

	err = r2.Delete(ctx, filepath.Base(healthy.Dir))
	s, gerr := r.Get(ctx, "user:1")
	require.NoError(t, gerr, "the healthy session user:1 was removed by its stored name (Delete returned %v)", err)
	require.Equal(t, 3, s.Checkpoints)
	require.Error(t, err, "a healthy session is not removed by its stored name")
}

// Delete of a damaged session of unknown ID by its stored name, while a
// writer holds it (a Store opened on its directory to recover its
// checkpoints), is ErrLocked, naming where the session is, and changes
// nothing.
func TestDeleteByStoredNameOfAHeldDamagedSessionIsErrLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	damaged, err := r.Create(ctx, "user:2", nil)
	require.NoError(t, err)
	playSessionSteps(t, r, "user:2", 1)
	require.NoError(t, os.Remove(filepath.Join(damaged.Dir, "session.json")))
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "", list[0].ID, "a damaged session of unknown ID")

	st, err := checkpoint.Open[int](damaged.Dir, checkpoint.NoSync(), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer st.Close()
	err = r.Delete(ctx, filepath.Base(damaged.Dir))
	require.ErrorIs(t, err, checkpoint.ErrLocked, "a writer holds the damaged session")
	require.ErrorContains(t, err, damaged.Dir, "the error names where the session is (not the mapped name of its stored name)")
	require.DirExists(t, damaged.Dir)
}

// Delete by its stored name of a damaged session whose session.json is a
// directory holding files is ErrCorrupt, as by its ID, and leaves the
// files.
func TestDeleteByStoredNameOfASessionJSONDirectoryHoldingFilesIsErrCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	s, err := r.Create(ctx, "user:7", nil)
	require.NoError(t, err)
	playSessionSteps(t, r, "user:7", 1)
	notAFile(t, r, "user:7", "dir")
	kept := filepath.Join(s.Dir, "session.json", "notes.txt")
	require.NoError(t, os.WriteFile(kept, []byte("mine"), 0o644))
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Equal(t, "", list[0].ID, "listed by its stored name")

	err = r.Delete(ctx, filepath.Base(s.Dir))
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "session.json is a directory that is not empty")
	require.FileExists(t, kept)
}

// wrapsASentinel reports whether err wraps one of the package's sentinel
// errors, as every error of bad input must.
func wrapsASentinel(err error) bool {
	for _, s := range []error{checkpoint.ErrNotFound, checkpoint.ErrCorrupt, checkpoint.ErrExists, checkpoint.ErrLocked,
		checkpoint.ErrReadOnly, checkpoint.ErrInvalid, checkpoint.ErrConflict} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// A session directory holding a directory of the user's (logs kept beside
// the checkpoints) makes Delete refuse before it hides anything: an error
// wrapping ErrCorrupt that names it, and the session stays whole, rather
// than a session hidden for ever whose ID Create refuses.
func TestDeleteOfASessionHoldingADirectoryFreesItsIDOrLeavesItWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	s, err := r.Create(ctx, "user:1", nil)
	require.NoError(t, err)
	playSessionSteps(t, r, "user:1", 2)
	logs := filepath.Join(s.Dir, "logs", "events.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(logs), 0o755))
	require.NoError(t, os.WriteFile(logs, []byte("mine"), 0o644))
	got, err := r.Get(ctx, "user:1")
	require.NoError(t, err, "a healthy session")
	require.Equal(t, 2, got.Checkpoints)

	first := r.Delete(ctx, "user:1")
	if first == nil {
		_, err := r.Create(ctx, "user:1", nil)
		require.NoError(t, err, "once Delete returned nil the ID is free")
		return
	}
	got, err = r.Get(ctx, "user:1")
	require.NoError(t, err, "a Delete that refuses leaves the session whole (it failed with %v, and the next Delete with %v)", first, r.Delete(ctx, "user:1"))
	require.Equal(t, 2, got.Checkpoints)
	require.ErrorIs(t, first, checkpoint.ErrCorrupt, "a Delete that fails on bad input says so with a sentinel")
}

// Delete and PruneIdle beside a session whose lock file is a directory
// (made by hand) fail with an error wrapping a sentinel (ErrInvalid), and
// the session stays whole.
func TestDeleteOfASessionWhoseLockFileIsADirectoryWrapsASentinel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	s, err := r.Create(ctx, "s", nil)
	require.NoError(t, err)
	playSessionSteps(t, r, "s", 1)
	lock := filepath.Join(s.Dir, dirstore.LockName)
	require.NoError(t, os.Remove(lock))
	require.NoError(t, os.MkdirAll(filepath.Join(lock, "x"), 0o755))

	err = r.Delete(ctx, "s")
	require.Error(t, err)
	require.True(t, wrapsASentinel(err), "Delete's error wraps no sentinel: %v", err)
	_, err = r.PruneIdle(ctx, 0)
	require.True(t, err == nil || wrapsASentinel(err), "PruneIdle's error wraps no sentinel: %v", err)
	_, err = r.Get(ctx, "s")
	require.NoError(t, err, "the session stays whole")
}

// RemoveStaging and PruneIdle beside a running Delete (its tombstone
// written, its lock held) leave that deletion to it, without an error:
// nothing was interrupted.
func TestRemoveStagingBesideARunningDeleteFailsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	other := openSessions(t, dir)
	_, err := other.Create(ctx, "s", nil)
	require.NoError(t, err)
	playSessionSteps(t, other, "s", 2)
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	var mu sync.Mutex
	once := false
	var stagingErr, pruneErr error
	r, err := checkpoint.OpenSessionsBackend(inject.Wrap(b, func(op inject.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if op.Kind == inject.Remove && op.Name != "session.json" && !strings.HasPrefix(op.Name, ".") && !once {
			once = true // the Delete holds the lock, its tombstone written
			_, stagingErr = other.RemoveStaging(ctx)
			_, pruneErr = other.PruneIdle(ctx, 0)
		}
		return nil
	}), checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.Delete(ctx, "s"))
	require.True(t, once)
	require.NoError(t, pruneErr, "PruneIdle leaves a running deletion alone")
	require.NoError(t, stagingErr, "RemoveStaging beside a running Delete")
}
