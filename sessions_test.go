package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/stretchr/testify/require"
)

// sessionIDs returns the IDs of list, in its order.
func sessionIDs(list []checkpoint.Session) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}

// listedIDs returns the IDs r lists, sorted, each of a session that reads.
func listedIDs(t *testing.T, r *checkpoint.Sessions) []string {
	t.Helper()
	list, err := r.List(context.Background())
	require.NoError(t, err)
	var ids []string
	for _, s := range list {
		require.NoError(t, s.Err, s.ID)
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

// playSession saves steps 1 to last of the session id.
func playSession(t *testing.T, r *checkpoint.Sessions, id string, last int64) {
	t.Helper()
	st, err := checkpoint.OpenSessionStore[int](r, id)
	require.NoError(t, err)
	for step := int64(1); step <= last; step++ {
		_, err := st.Save(context.Background(), step, int(step)*10)
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
}

// dirNamesExcept returns the names in dir but skip, sorted.
func dirNamesExcept(t *testing.T, dir string, skip string) []string {
	t.Helper()
	var out []string
	for _, n := range dirNames(t, dir) {
		if n != skip {
			out = append(out, n)
		}
	}
	return out
}

// TestSessionsCreateListAndResumeTheMostRecent: New numbers sessions from
// 001, each in its directory with the root's layout; List puts the most
// recently active first (a save or a SetMeta makes a session active), with
// its checkpoints, last step, last save and meta; ResumeSession opens the
// most recent, and is ErrNotFound in an empty root. Create takes a name
// once, and New numbers on after the highest number.
func TestSessionsCreateListAndResumeTheMostRecent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clock := &manualClock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	tick := func() { clock.set(clock.now().Add(time.Minute)) }
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3), checkpoint.WithClock(clock.now))

	_, _, err := checkpoint.ResumeLatestSession[int](ctx, r)
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "no session yet: start a fresh one")

	var ids []string
	for range 3 {
		tick()
		s, err := r.New(ctx, map[string]string{"stories_done": "0"})
		require.NoError(t, err)
		ids = append(ids, s.ID)
		require.Equal(t, filepath.Join(dir, s.ID), s.Dir)
		require.Equal(t, clock.now(), s.Created)
		require.Zero(t, s.Checkpoints)
	}
	require.Equal(t, []string{"001", "002", "003"}, ids)
	require.FileExists(t, filepath.Join(dir, "002", "session.json"))

	// Play in session 001: it becomes the most recently active.
	tick()
	st, err := checkpoint.OpenSessionStore[int](r, "001")
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := st.Save(ctx, step, int(step)*10)
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	require.FileExists(t, filepath.Join(dir, "001", "turn_003.json"), "the root's layout applies")

	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"001", "003", "002"}, sessionIDs(list))
	require.Equal(t, 3, list[0].Checkpoints)
	require.Equal(t, int64(3), list[0].LastStep)
	require.Equal(t, checkpoint.KindStep, list[0].LastKind)
	var size int64
	for _, name := range []string{"turn_001.json", "turn_002.json", "turn_003.json"} {
		fi, err := os.Stat(filepath.Join(dir, "001", name))
		require.NoError(t, err)
		size += fi.Size()
	}
	require.Equal(t, size, list[0].Size, "Size is the sum of the checkpoints' sizes")
	require.Zero(t, list[1].Size)
	require.Empty(t, list[1].LastKind)
	require.WithinDuration(t, clock.now(), list[0].LastSaved, time.Microsecond, "three saves at one clock reading are a nanosecond apart")
	require.Equal(t, map[string]string{"stories_done": "0"}, list[0].Meta)

	// Progress on 002 makes it the most recent.
	tick()
	require.NoError(t, r.SetMeta(ctx, "002", map[string]string{"stories_done": "4", "stories_total": "9"}))
	s, err := r.Get(ctx, "002")
	require.NoError(t, err)
	require.Equal(t, "4", s.Meta["stories_done"])
	require.Equal(t, clock.now(), s.Updated)
	require.Equal(t, clock.now(), s.Active())

	st, got, err := checkpoint.ResumeLatestSession[int](ctx, r)
	require.NoError(t, err)
	require.Equal(t, "002", got.ID)
	require.NoError(t, st.Close())

	tick()
	st, got, err = checkpoint.ResumeLatestSession[int](ctx, r)
	require.NoError(t, err)
	require.Equal(t, "002", got.ID)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	// Numbering goes on after the highest number, whatever else is there.
	_, err = r.Create(ctx, "run-2026-11-21", nil)
	require.NoError(t, err)
	_, err = r.Create(ctx, "run-2026-11-21", nil)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	s, err = r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "004", s.ID)
}

// TestSessionIDsAreValidated: an empty ID, one that is not valid UTF-8
// and one over MaxSessionIDLen bytes are ErrInvalid to every call that
// takes one, and nothing is created; any other string is an ID.
func TestSessionIDsAreValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	for _, id := range []string{"", "\xff", "a\xc3", strings.Repeat("x", checkpoint.MaxSessionIDLen+1), strings.Repeat("é", checkpoint.MaxSessionIDLen/2) + "x"} {
		_, err := r.Create(ctx, id, nil)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", id)
		_, err = checkpoint.OpenSessionStore[int](r, id)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", id)
		_, err = r.Fork(ctx, id, 1, nil)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", id)
		require.ErrorIs(t, r.SetMeta(ctx, id, nil), checkpoint.ErrInvalid, "%q", id)
		_, err = r.Get(ctx, id)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", id)
	}
	for _, id := range []string{"001", "run_7", "a.b-c", "x", ".", "..", "../x", "a/b", `a\b`, ".hidden", "a b", "é", "\x00", string(make([]byte, 65)), strings.Repeat("x", checkpoint.MaxSessionIDLen)} {
		require.NoError(t, checkpoint.ValidSessionID(id), id)
	}
	require.GreaterOrEqual(t, checkpoint.MaxSessionIDLen, 512)
	require.Empty(t, dirNamesExcept(t, dir, ".sessions.lock"), "nothing was created")
}

// TestNumberingGoesOnPastHugeSessionIDs creates sessions whose IDs are
// numbers past every machine integer: New keeps numbering after them, and
// once no number is left it says so every time and creates nothing.
func TestNumberingGoesOnPastHugeSessionIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), checkpoint.NoSync())
	for _, c := range []struct{ created, next, after string }{
		{"9223372036854775807", "9223372036854775808", "9223372036854775809"},
		{"18446744073709551615", "18446744073709551616", "18446744073709551617"},
		{"0099999999999999999999999", "100000000000000000000000", "100000000000000000000001"},
	} {
		_, err := r.Create(ctx, c.created, nil)
		require.NoError(t, err)
		s, err := r.New(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, c.next, s.ID)
		s, err = r.New(ctx, nil)
		require.NoError(t, err, "numbering is stuck after %s", c.created)
		require.Equal(t, c.after, s.ID)
	}

	_, err := r.Create(ctx, strings.Repeat("9", checkpoint.MaxNumberedIDLen), nil)
	require.NoError(t, err)
	before, err := r.List(ctx)
	require.NoError(t, err)
	for range 2 {
		_, err = r.New(ctx, nil)
		require.ErrorIs(t, err, checkpoint.ErrInvalid)
		require.ErrorContains(t, err, "no session number is left")
	}
	after, err := r.List(ctx)
	require.NoError(t, err)
	require.Equal(t, sessionIDs(before), sessionIDs(after), "nothing was created")
}

// TestSessionMetaIsReplacedAtomically: SetMetas at once each replace the
// meta whole, and leave no temporary file.
func TestSessionMetaIsReplacedAtomically(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	s, err := r.New(ctx, map[string]string{"a": "1"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if err := r.SetMeta(ctx, s.ID, map[string]string{"n": fmt.Sprint(i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := r.Get(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, got.Meta, 1)
	require.Contains(t, got.Meta, "n")
	for _, name := range dirNames(t, s.Dir) {
		require.Contains(t, []string{"session.json"}, name, "no temporary file is left")
	}
}

// TestSessionFileIsReserved: session.json is the root's: a session's store
// refuses it as a side file, and opening the store leaves its temporary
// files alone; the next SetMeta removes a stale one and leaves a fresh one.
func TestSessionFileIsReserved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	s, err := r.New(ctx, map[string]string{"turn": "1"})
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, s.ID)
	require.NoError(t, err)
	require.ErrorIs(t, st.WriteJSON(ctx, "session.json", 1), checkpoint.ErrInvalid)
	require.NoError(t, st.Close())

	// A SetMeta in flight in another process has a temporary file of
	// session.json: opening the session's store must leave it alone, and
	// the next SetMeta removes it if it is stale.
	temp := filepath.Join(s.Dir, ".session.json123456")
	require.NoError(t, os.WriteFile(temp, []byte("{"), 0o644))
	fresh := filepath.Join(s.Dir, ".session.json654321")
	require.NoError(t, os.WriteFile(fresh, []byte("{"), 0o644))
	old := time.Now().Add(-2 * checkpoint.StaleSessionTemp)
	require.NoError(t, os.Chtimes(temp, old, old)) // the SetMeta that wrote it is long gone
	st, err = checkpoint.OpenSessionStore[int](r, s.ID)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.FileExists(t, temp)
	require.NoError(t, r.SetMeta(ctx, s.ID, map[string]string{"turn": "2"}))
	require.NoFileExists(t, temp)
	require.FileExists(t, fresh, "a SetMeta may be writing it right now")
	got, err := r.Get(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "2", got.Meta["turn"])
}

// TestReadOnlySessionsReadBesideTheWriter: a read-only root refuses New,
// Fork, SetMeta and saves with ErrReadOnly, and reads a session beside its
// live writer, whose lock still keeps a second writer out; a read-only root
// that does not exist is ErrNotFound.
func TestReadOnlySessionsReadBesideTheWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	_, err := checkpoint.OpenSessions(filepath.Join(dir, "missing"), checkpoint.ReadOnly())
	require.ErrorIs(t, err, checkpoint.ErrNotFound)

	w := openSessions(t, dir)
	s, err := w.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](w, s.ID)
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)

	r := openSessions(t, dir, checkpoint.ReadOnly())
	_, err = r.New(ctx, nil)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)
	_, err = r.Fork(ctx, s.ID, 1, nil)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)
	require.ErrorIs(t, r.SetMeta(ctx, s.ID, nil), checkpoint.ErrReadOnly)
	// Reading works beside the live writer.
	rst, err := checkpoint.OpenSessionStore[int](r, s.ID)
	require.NoError(t, err)
	v, _, err := rst.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	_, err = rst.Save(ctx, 2, 2)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)
	require.NoError(t, rst.Close())

	// The session's own writer lock still keeps a second writer out.
	_, err = checkpoint.OpenSessionStore[int](w, s.ID)
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.NoError(t, st.Close())
}

// TestDirectoryRootReadsTheSameEitherWay opens one directory as a root of
// sessions both ways: each sees, opens and numbers past the other's
// sessions.
func TestDirectoryRootReadsTheSameEitherWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	opts := []checkpoint.Option{checkpoint.NoSync(), checkpoint.WithLayout("turn", 3)}
	local, err := checkpoint.OpenSessions(dir, opts...)
	require.NoError(t, err)
	defer local.Close()
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	generic, err := checkpoint.OpenSessionsBackend(b, opts...)
	require.NoError(t, err)
	defer generic.Close()

	s, err := local.New(ctx, map[string]string{"by": "local"})
	require.NoError(t, err)
	playSession(t, local, s.ID, 2)
	_, err = local.Fork(ctx, s.ID, 1, nil)
	require.NoError(t, err)
	g, err := generic.New(ctx, map[string]string{"by": "generic"})
	require.NoError(t, err)
	require.Equal(t, "003", g.ID, "numbering goes on past the other's sessions")
	playSession(t, generic, g.ID, 1)
	_, err = generic.Fork(ctx, s.ID, 2, nil)
	require.NoError(t, err)

	a, err := local.List(ctx)
	require.NoError(t, err)
	bl, err := generic.List(ctx)
	require.NoError(t, err)
	require.Equal(t, a, bl)
	require.Equal(t, []string{"001", "002", "003", "004"}, listedIDs(t, local))
	for _, s := range a {
		require.NoError(t, s.Err)
	}
}

// TestDirectoryBackendPassesTheSessionsSuite: backendtest's sessions suite
// passes over the directory's Backend (dirstore.Open), as over
// backendtest.Mem (TestMemRunsSessions, package backendtest).
func TestDirectoryBackendPassesTheSessionsSuite(t *testing.T) {
	t.Parallel()
	backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
		b, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
		require.NoError(t, err)
		return b
	})
}

// On a coarse clock a SetMeta in the tick of another session's last save
// still makes its session the most recently active.
func TestSetMetaInTheTickOfAnotherSessionsSaveMakesItTheMostRecentlyActive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := checkpoint.WithClock(func() time.Time { return tick })
	r := openSessionRoot(t, dir, checkpoint.NoSync(), clock)
	for range 2 {
		_, err := r.New(ctx, nil)
		require.NoError(t, err)
	}
	st, err := checkpoint.OpenSessionStore[int](r, "001")
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := st.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())

	other := openSessionRoot(t, dir, checkpoint.NoSync(), clock)
	ids := listedSessionIDs(t, other)
	require.Len(t, ids, 2)
	behind := ids[1]
	require.NoError(t, other.SetMeta(ctx, behind, map[string]string{"players": "4"}))
	st, got, err := checkpoint.ResumeLatestSession[int](ctx, r)
	require.NoError(t, err)
	require.Equal(t, behind, got.ID, "SetMeta made %s the most recently active", behind)
	require.NoError(t, st.Close())
}

// On a coarse clock the session played last is the most recently active,
// though sessions were created in the same tick after its store's first
// save would be stamped.
func TestSessionPlayedInTheTickOfNewerSessionsIsTheMostRecentlyActive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := openSessionRoot(t, t.TempDir(), checkpoint.NoSync(), checkpoint.WithClock(func() time.Time { return tick }))
	for range 3 {
		_, err := r.New(ctx, nil)
		require.NoError(t, err)
	}
	_, err := r.List(ctx) // reads the three sessions' times
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, "001")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Equal(t, "001", listedSessionIDs(t, r)[0])
}

// openSessionRoot opens a root of sessions with opts and closes it when t
// ends.
func openSessionRoot(t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Sessions {
	t.Helper()
	r, err := checkpoint.OpenSessions(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// listedSessionIDs returns the IDs of r's sessions, most recently active
// first.
func listedSessionIDs(t *testing.T, r *checkpoint.Sessions) []string {
	t.Helper()
	list, err := r.List(context.Background())
	require.NoError(t, err)
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

// Sessions over a wrapper that wraps its child stores too (the fault
// injector) link a fork's checkpoints as over the directory (Linker
// through Unwrap, of the source as well), and remove a failed creation's
// empty directory (ChildRemover).
func TestSessionsOverAWrapperLinkAndRemoveAsTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := checkpoint.OpenDir(dir, checkpoint.NoSync())
	require.NoError(t, err)
	failClaim := false
	var mu sync.Mutex
	r, err := checkpoint.OpenSessionsBackend(inject.Wrap(d, func(op inject.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if failClaim && op.Kind == inject.Create && op.Name == checkpoint.ClaimName {
			return errInjected
		}
		return nil
	}), checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, src.ID)
	require.NoError(t, err)
	info, err := st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	f, err := r.Fork(ctx, src.ID, 1, nil)
	require.NoError(t, err)
	a, err := os.Stat(info.Path)
	require.NoError(t, err)
	b, err := os.Stat(filepath.Join(f.Dir, filepath.Base(info.Path)))
	require.NoError(t, err)
	require.True(t, os.SameFile(a, b), "the fork copied the checkpoint instead of linking it")

	mu.Lock()
	failClaim = true
	mu.Unlock()
	_, err = r.Create(ctx, "run", nil)
	require.ErrorIs(t, err, errInjected)
	require.NoDirExists(t, filepath.Join(dir, "run"), "a failed creation left its directory")
}
