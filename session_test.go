package checkpoint

import (
	"context"
	"fmt"
	"github.com/gocheckpoint/checkpoint/storage"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/dirstore"
)

// openSessions opens a root of sessions with NoSync, as openStore does;
// openDurableSessions fsyncs.
func openSessions(t *testing.T, dir string, opts ...Option) *Sessions {
	t.Helper()
	return openDurableSessions(t, dir, append([]Option{NoSync()}, opts...)...)
}

func openDurableSessions(t *testing.T, dir string, opts ...Option) *Sessions {
	t.Helper()
	r, err := OpenSessions(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

func sessionIDs(list []Session) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}

func TestSessionsCreateListResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clock := &manualClock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	tick := func() { clock.set(clock.now().Add(time.Minute)) }
	r := openSessions(t, dir, WithLayout("turn", 3), withClock(clock.now))

	_, _, err := ResumeSession[int](ctx, r)
	require.ErrorIs(t, err, ErrNotFound, "no session yet: start a fresh one")

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
	st, err := OpenSession[int](r, "001")
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

	st, got, err := ResumeSession[int](ctx, r)
	require.NoError(t, err)
	require.Equal(t, "002", got.ID)
	require.NoError(t, st.Close())

	tick()
	st, got, err = ResumeSession[int](ctx, r)
	require.NoError(t, err)
	require.Equal(t, "002", got.ID)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	// Numbering goes on after the highest number, whatever else is there.
	_, err = r.Create(ctx, "run-2026-11-21", nil)
	require.NoError(t, err)
	_, err = r.Create(ctx, "run-2026-11-21", nil)
	require.ErrorIs(t, err, ErrExists)
	s, err = r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "004", s.ID)
}

func TestSessionIDsAreValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	for _, id := range []string{"", ".", "..", "../x", "a/b", `a\b`, ".hidden", "a b", "é", string(make([]byte, 65))} {
		_, err := r.Create(ctx, id, nil)
		require.ErrorIs(t, err, ErrInvalid, "%q", id)
		_, err = OpenSession[int](r, id)
		require.ErrorIs(t, err, ErrInvalid, "%q", id)
		_, err = r.Fork(ctx, id, 1, nil)
		require.ErrorIs(t, err, ErrInvalid, "%q", id)
		require.ErrorIs(t, r.SetMeta(ctx, id, nil), ErrInvalid, "%q", id)
		_, err = r.Get(ctx, id)
		require.ErrorIs(t, err, ErrInvalid, "%q", id)
	}
	for _, id := range []string{"001", "run_7", "a.b-c", "x"} {
		require.NoError(t, ValidSessionID(id), id)
	}
	require.Empty(t, dirNamesExcept(t, dir, sessionsLockName), "nothing was created")
}

func TestMissingAndDamagedSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	good, err := r.New(ctx, nil)
	require.NoError(t, err)
	bad, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bad.Dir, "session.json"), []byte(`{"format":1,"created":`), 0o644))
	// No session.json at all, and a checkpoint: a damaged session. (An
	// empty directory is none: see TestEmptyDirectoryIsNoSession.)
	st, err := Open[int](filepath.Join(dir, "003"))
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644))
	if canSymlink(t) {
		require.NoError(t, os.Symlink(good.Dir, filepath.Join(dir, "link")))
	}

	_, err = OpenSession[int](r, "999")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = r.Get(ctx, "999")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = OpenSession[int](r, bad.ID)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, filepath.Join(bad.Dir, "session.json"))
	_, err = OpenSession[int](r, "003")
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = OpenSession[int](r, "link")
	require.ErrorIs(t, err, ErrNotFound, "a symbolic link is not a session")
	_, err = OpenSession[int](r, "notes.txt")
	require.ErrorIs(t, err, ErrNotFound)

	list, err := r.List(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{good.ID, bad.ID, "003"}, sessionIDs(list), "damage hides no session")
	for _, s := range list {
		if s.ID == good.ID {
			require.NoError(t, s.Err)
		} else {
			require.ErrorIs(t, s.Err, ErrCorrupt, s.ID)
		}
	}

	// A damaged most recent session is reported by ResumeSession; the
	// caller can start a fresh one.
	_, got, err := ResumeSession[int](ctx, r)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Equal(t, "003", got.ID)
	require.Equal(t, 1, got.Checkpoints, "what can be read of a damaged session is filled in")
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "004", s.ID)
}

func TestForkCopiesHistoryUpToStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, WithLayout("turn", 3), WithRolling(), Every(2))
	src, err := r.New(ctx, map[string]string{"campaign": "a"})
	require.NoError(t, err)
	st, err := OpenSession[int](r, src.ID)
	require.NoError(t, err)
	for step := int64(1); step <= 9; step++ {
		_, _, err := st.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	before := dirNames(t, src.Dir)

	_, err = r.Fork(ctx, src.ID, 5, nil)
	require.ErrorIs(t, err, ErrNotFound, "step 5 has no checkpoint (Every(2)): nothing is forked")
	_, err = r.Fork(ctx, "999", 4, nil)
	require.ErrorIs(t, err, ErrNotFound)

	fork, err := r.Fork(ctx, src.ID, 4, map[string]string{"branch": "b"})
	require.NoError(t, err)
	require.Equal(t, "002", fork.ID)
	require.Equal(t, src.ID, fork.Parent)
	require.Equal(t, int64(4), fork.ParentStep)
	require.Equal(t, map[string]string{"branch": "b"}, fork.Meta)
	require.Equal(t, 2, fork.Checkpoints)
	require.Equal(t, []string{"session.json", "turn_002.json", "turn_004.json"}, dirNames(t, fork.Dir), "the rolling file holds step 9: it stays behind")

	// Hard links where the filesystem allows: the same file, not a copy.
	a, err := os.Stat(filepath.Join(src.Dir, "turn_004.json"))
	require.NoError(t, err)
	b, err := os.Stat(filepath.Join(fork.Dir, "turn_004.json"))
	require.NoError(t, err)
	require.True(t, os.SameFile(a, b))

	// Play on in the fork: the source's later turns are untouched.
	fst, err := OpenSession[int](r, fork.ID)
	require.NoError(t, err)
	v, info, err := fst.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, v)
	require.Equal(t, int64(4), info.Step)
	for step := int64(5); step <= 9; step++ {
		_, _, err := fst.Tick(ctx, step, int(step)*100)
		require.NoError(t, err)
	}
	v, _, err = fst.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 900, v)
	require.NoError(t, fst.Close())

	require.Equal(t, before, dirNames(t, src.Dir))
	v, info, err = st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 9, v)
	require.Equal(t, KindRolling, info.Kind)
	for step := int64(6); step <= 8; step += 2 {
		v, _, err := st.Load(ctx, step)
		require.NoError(t, err)
		require.Equal(t, int(step), v)
	}
	require.NoError(t, st.Close())
}

func TestForkTakesRollingFileUpToStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), WithRolling(), Every(10))
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := OpenSession[int](r, src.ID)
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, _, err := st.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	fork, err := r.Fork(ctx, src.ID, 3, nil)
	require.NoError(t, err, "the rolling file holds step 3")
	fst, err := OpenSession[int](r, fork.ID)
	require.NoError(t, err)
	v, info, err := fst.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.Equal(t, KindRolling, info.Kind)
	require.NoError(t, fst.Close())
}

func TestForkOfDamagedStepCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := OpenSession[int](r, src.ID)
	require.NoError(t, err)
	info, err := st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	b, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	b[len(b)-5] ^= 1
	require.NoError(t, os.WriteFile(info.Path, b, 0o644))

	_, err = r.Fork(ctx, src.ID, 1, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "fork session", e.Op)
	require.Equal(t, int64(1), e.Step)
	require.Equal(t, []string{src.ID}, dirNamesExcept(t, dir, sessionsLockName))
}

func dirNamesExcept(t *testing.T, dir string, skip string) []string {
	var out []string
	for _, n := range dirNames(t, dir) {
		if n != skip {
			out = append(out, n)
		}
	}
	return out
}

func TestConcurrentNewSessionsGetDistinctIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// Two roots on one directory stand for two processes.
	roots := []*Sessions{openSessions(t, dir), openSessions(t, dir)}
	var wg sync.WaitGroup
	ids := make(chan string, 40)
	for i := range 8 {
		wg.Go(func() {
			for range 5 {
				s, err := roots[i%2].New(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				ids <- s.ID
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		require.False(t, seen[id], "ID %s given twice", id)
		seen[id] = true
	}
	require.Len(t, seen, 40)
	require.True(t, seen["040"])
}

func TestHalfMadeSessionIsInvisibleAndCleanedUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	// What a crash in the middle of New or Fork leaves behind.
	staging := filepath.Join(dir, stagingPrefix+"ABC")
	require.NoError(t, os.MkdirAll(staging, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(staging, "step_00000001.json"), []byte("{"), 0o644))

	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "001", s.ID)
	require.NoDirExists(t, staging)
}

func TestReadOnlySessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	_, err := OpenSessions(filepath.Join(dir, "missing"), ReadOnly())
	require.ErrorIs(t, err, ErrNotFound)

	w := openSessions(t, dir)
	s, err := w.New(ctx, nil)
	require.NoError(t, err)
	st, err := OpenSession[int](w, s.ID)
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)

	r := openSessions(t, dir, ReadOnly())
	_, err = r.New(ctx, nil)
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = r.Fork(ctx, s.ID, 1, nil)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, r.SetMeta(ctx, s.ID, nil), ErrReadOnly)
	// Reading works beside the live writer.
	rst, err := OpenSession[int](r, s.ID)
	require.NoError(t, err)
	v, _, err := rst.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	_, err = rst.Save(ctx, 2, 2)
	require.ErrorIs(t, err, ErrReadOnly)
	require.NoError(t, rst.Close())

	// The session's own writer lock still keeps a second writer out.
	_, err = OpenSession[int](w, s.ID)
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, st.Close())
}

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

func TestSessionsRootOutsideIsUnreachable(t *testing.T) {
	t.Parallel()
	requireSymlinks(t)
	ctx := context.Background()
	parent := t.TempDir()
	outside := filepath.Join(parent, "outside")
	require.NoError(t, os.Mkdir(outside, 0o755))
	dir := filepath.Join(parent, "root")
	r := openSessions(t, dir)
	// A session directory replaced by a link to a directory outside.
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "001")))
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "002", s.ID, "the link is no session, but its name is taken")
	_, err = OpenSession[int](r, "001")
	require.ErrorIs(t, err, ErrNotFound)
	err = r.SetMeta(ctx, "001", nil)
	require.ErrorIs(t, err, ErrNotFound)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// forkWhileWriting forks session src at the step its writer (write) has
// just reached, again and again, and checks that every fork that succeeds
// has Latest at that step: a running writer may make Fork fail, never lie.
func forkWhileWriting(t *testing.T, r *Sessions, src string, write func(step int64) error) {
	ctx := context.Background()
	var cur atomic.Int64
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for step := int64(1); ; step++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := write(step); err != nil {
				t.Error(err)
				return
			}
			cur.Store(step)
		}
	})
	stopped := false
	stopWriter := func() {
		if !stopped {
			stopped = true
			close(stop)
			writer.Wait()
		}
	}
	defer stopWriter()
	check := func(step int64, f Session) {
		t.Helper()
		fst, err := OpenSession[int](r, f.ID, ReadOnly())
		require.NoError(t, err)
		v, info, err := fst.Latest(ctx)
		require.NoError(t, err)
		require.NoError(t, fst.Close())
		require.Equal(t, step, info.Step, "Fork(step %d) succeeded", step)
		require.Equal(t, int(step), v)
	}
	for range 100 {
		step := cur.Load()
		f, err := r.Fork(ctx, src, step, nil)
		if err != nil {
			require.ErrorIs(t, err, ErrNotFound)
			continue
		}
		check(step, f)
	}
	// However the race went, a fork of the step the stopped writer
	// reached last succeeds: the checks above cannot all have been
	// skipped by a writer that always won.
	stopWriter()
	step := cur.Load()
	f, err := r.Fork(ctx, src, step, nil)
	require.NoError(t, err)
	check(step, f)
}

func TestForkBesideRunningWriterWithRollingFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), WithRolling(), Every(1<<40))
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := OpenSession[int](r, src.ID)
	require.NoError(t, err)
	defer st.Close()
	_, _, err = st.Tick(ctx, 0, 0)
	require.NoError(t, err)
	forkWhileWriting(t, r, src.ID, func(step int64) error {
		_, _, err := st.Tick(ctx, step, int(step))
		return err
	})
}

func TestForkBesideRunningWriterThatPrunes(t *testing.T) {
	t.Parallel()
	skipUnderWine(t, "a save (a few file calls) outruns a fork (dozens, each a round trip to wineserver), so every fork can lose the race to the pruning writer")
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), KeepLast(1))
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := OpenSession[int](r, src.ID)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Save(ctx, 0, 0)
	require.NoError(t, err)
	forkWhileWriting(t, r, src.ID, func(step int64) error {
		_, err := st.Save(ctx, step, int(step))
		return err
	})
}

// unlinkable wraps a Backend, and the child stores it returns, without
// Linker: a backend that cannot link.
type unlinkable struct{ Backend }

func (u unlinkable) Sub(ctx context.Context, name string, create bool) (Backend, error) {
	b, err := u.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return unlinkable{b}, nil
}

// linkFails is a child store whose Link fails as across file systems.
type linkFails struct{ Backend }

func (l linkFails) Unwrap() Backend { return l.Backend }

func (l linkFails) RemoveChild(ctx context.Context, name string) error {
	return l.Backend.(storage.ChildRemover).RemoveChild(ctx, name)
}

func (l linkFails) Link(context.Context, Backend, string) (Object, error) {
	return Object{}, &os.LinkError{Op: "link", Err: syscall.EXDEV}
}

type linkFailsRoot struct{ linkFails }

func (l linkFailsRoot) Sub(ctx context.Context, name string, create bool) (Backend, error) {
	b, err := l.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return linkFails{b}, nil
}

// TestForkCopiesWhereLinkingFails forks on a directory whose Link fails
// and on a Backend without Linker: either way the checkpoints are copied.
func TestForkCopiesWhereLinkingFails(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		wrap func(b Backend) Backend
	}{
		{"link fails", func(b Backend) Backend { return linkFailsRoot{linkFails{b}} }},
		{"no Linker", func(b Backend) Backend { return unlinkable{b} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			b, err := dirstore.Open(dir, dirstore.NoSync())
			require.NoError(t, err)
			r, err := OpenSessionsBackend(c.wrap(b), NoSync())
			require.NoError(t, err)
			t.Cleanup(func() { r.Close() })
			src, err := r.New(ctx, nil)
			require.NoError(t, err)
			st, err := OpenSession[int](r, src.ID)
			require.NoError(t, err)
			for step := int64(1); step <= 3; step++ {
				_, err = st.Save(ctx, step, int(step))
				require.NoError(t, err)
			}
			require.NoError(t, st.Close())
			fork, err := r.Fork(ctx, src.ID, 2, nil)
			require.NoError(t, err)
			require.Equal(t, 2, fork.Checkpoints)
			for _, name := range []string{"step_00000001.json", "step_00000002.json"} {
				a, err := os.ReadFile(filepath.Join(src.Dir, name))
				require.NoError(t, err)
				b, err := os.ReadFile(filepath.Join(fork.Dir, name))
				require.NoError(t, err)
				require.Equal(t, a, b, "a byte-for-byte copy")
				fa, err := os.Stat(filepath.Join(src.Dir, name))
				require.NoError(t, err)
				fb, err := os.Stat(filepath.Join(fork.Dir, name))
				require.NoError(t, err)
				require.False(t, os.SameFile(fa, fb), "a copy, not a link")
			}
		})
	}
}

// TestForkLinksInADirectory: on a directory (a Linker), a fork's
// checkpoints are hard links of the source's; its rolling file is a copy.
func TestForkLinksInADirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), WithRolling(), Every(2))
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := OpenSession[int](r, src.ID)
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, _, err = st.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	infos, err := st.List(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	var numbered, rolling string
	for _, info := range infos {
		if info.Kind == KindRolling {
			rolling = info.Name()
		} else {
			numbered = info.Name()
		}
	}
	fork, err := r.Fork(ctx, src.ID, 3, nil)
	require.NoError(t, err)
	require.Equal(t, 2, fork.Checkpoints)
	same := func(name string) bool {
		fa, err := os.Stat(filepath.Join(src.Dir, name))
		require.NoError(t, err)
		fb, err := os.Stat(filepath.Join(fork.Dir, name))
		require.NoError(t, err)
		return os.SameFile(fa, fb)
	}
	require.True(t, same(numbered), "a numbered checkpoint is linked")
	require.False(t, same(rolling), "the rolling file is copied")
}

func TestSessionFileIsReserved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	s, err := r.New(ctx, map[string]string{"turn": "1"})
	require.NoError(t, err)
	st, err := OpenSession[int](r, s.ID)
	require.NoError(t, err)
	require.ErrorIs(t, st.WriteJSON(ctx, "session.json", 1), ErrInvalid)
	require.NoError(t, st.Close())

	// A SetMeta in flight in another process has a temporary file of
	// session.json: opening the session's store must leave it alone, and
	// the next SetMeta (under the root's lock) removes it if it is stale.
	temp := filepath.Join(s.Dir, ".session.json123456")
	require.NoError(t, os.WriteFile(temp, []byte("{"), 0o644))
	fresh := filepath.Join(s.Dir, ".session.json654321")
	require.NoError(t, os.WriteFile(fresh, []byte("{"), 0o644))
	old := time.Now().Add(-2 * staleSessionTemp)
	require.NoError(t, os.Chtimes(temp, old, old)) // the SetMeta that wrote it is long gone
	st, err = OpenSession[int](r, s.ID)
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

// TestNumberingGoesOnPastHugeSessionIDs creates sessions whose IDs are
// numbers past every machine integer: New keeps numbering after them, and
// once no number is left it says so every time and creates nothing.
func TestNumberingGoesOnPastHugeSessionIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), NoSync())
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

	_, err := r.Create(ctx, strings.Repeat("9", maxSessionIDLen), nil)
	require.NoError(t, err)
	before, err := r.List(ctx)
	require.NoError(t, err)
	for range 2 {
		_, err = r.New(ctx, nil)
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "no session number is left")
	}
	after, err := r.List(ctx)
	require.NoError(t, err)
	require.Equal(t, sessionIDs(before), sessionIDs(after), "nothing was created")
}

func listIDs(t *testing.T, r *Sessions) []string {
	t.Helper()
	list, err := r.List(context.Background())
	require.NoError(t, err)
	return sessionIDs(list)
}

// A fork of a session whose writer is running leaves the writer's rolling
// file as it was: its next save replaces it without a conflict (a hard link
// to it would change its Version).
func TestForkLeavesTheWritersRollingFileItsVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, err := OpenSessions(t.TempDir(), NoSync())
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(ctx, "a", nil)
	require.NoError(t, err)
	w, err := OpenSession[int](r, "a", Every(10), WithRolling())
	require.NoError(t, err)
	defer w.Close()
	for step := int64(0); step <= 1; step++ { // step 0 numbered, 1 rolling
		_, _, err = w.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}

	// Past the change time of the rolling file's last save, so that a
	// hard link made by the fork would show in its Version.
	passChangeTimeOf(t, filepath.Join(r.Dir(), "a", "step_last.json"), t.TempDir())
	_, err = r.Fork(ctx, "a", 1, nil)
	require.NoError(t, err)
	_, _, err = w.Tick(ctx, 2, 2)
	require.NoError(t, err, "the writer's rolling save after a fork")
}
