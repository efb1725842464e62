package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
)

// TestForkCopiesHistoryUpToStep: a fork at a step holds the source's
// checkpoints up to that step (hard links of them in a directory), not the
// rolling file that holds a later step, and names its parent; fork and
// source then go on apart. A step without a checkpoint, or a missing
// source, forks nothing.
func TestForkCopiesHistoryUpToStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(2))
	src, err := r.New(ctx, map[string]string{"campaign": "a"})
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, src.ID)
	require.NoError(t, err)
	for step := int64(1); step <= 9; step++ {
		_, _, err := st.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	before := dirNames(t, src.Dir)

	_, err = r.Fork(ctx, src.ID, 5, nil)
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "step 5 has no checkpoint (Every(2)): nothing is forked")
	_, err = r.Fork(ctx, "999", 4, nil)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)

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
	fst, err := checkpoint.OpenSessionStore[int](r, fork.ID)
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
	require.Equal(t, checkpoint.KindRolling, info.Kind)
	for step := int64(6); step <= 8; step += 2 {
		v, _, err := st.Load(ctx, step)
		require.NoError(t, err)
		require.Equal(t, int(step), v)
	}
	require.NoError(t, st.Close())
}

// TestForkTakesRollingFileUpToStep: a fork at the step the rolling file
// holds takes the rolling file, and resumes from it.
func TestForkTakesRollingFileUpToStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), checkpoint.WithRolling(), checkpoint.SaveEvery(10))
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, src.ID)
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, _, err := st.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	fork, err := r.Fork(ctx, src.ID, 3, nil)
	require.NoError(t, err, "the rolling file holds step 3")
	fst, err := checkpoint.OpenSessionStore[int](r, fork.ID)
	require.NoError(t, err)
	v, info, err := fst.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.Equal(t, checkpoint.KindRolling, info.Kind)
	require.NoError(t, fst.Close())
}

// TestForkOfDamagedStepCreatesNothing: a fork at a damaged checkpoint
// fails with ErrCorrupt, an *Error naming the operation and the step, and
// creates no session.
func TestForkOfDamagedStepCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := openSessions(t, dir)
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, src.ID)
	require.NoError(t, err)
	info, err := st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	b, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	b[len(b)-5] ^= 1
	require.NoError(t, os.WriteFile(info.Path, b, 0o644))

	_, err = r.Fork(ctx, src.ID, 1, nil)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	var e *checkpoint.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "fork session", e.Op)
	require.Equal(t, int64(1), e.Step)
	require.Equal(t, []string{src.ID}, dirNamesExcept(t, dir, ".sessions.lock"))
}

// TestForkLinksInADirectory: on a directory (a Linker), a fork's
// checkpoints are hard links of the source's; its rolling file is a copy.
func TestForkLinksInADirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), checkpoint.WithRolling(), checkpoint.SaveEvery(2))
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, src.ID)
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
		if info.Kind == checkpoint.KindRolling {
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

// TestForkCopiesWhereLinkingFails forks on a directory whose Link fails
// and on a Backend without Linker: either way the checkpoints are copied.
func TestForkCopiesWhereLinkingFails(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		wrap func(b checkpoint.Backend) checkpoint.Backend
	}{
		{"link fails", func(b checkpoint.Backend) checkpoint.Backend { return linkFailsRoot{linkFails{b}} }},
		{"no Linker", func(b checkpoint.Backend) checkpoint.Backend { return unlinkable{b} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			b, err := dirstore.Open(dir, dirstore.NoSync())
			require.NoError(t, err)
			r, err := checkpoint.OpenSessionsBackend(c.wrap(b), checkpoint.NoSync())
			require.NoError(t, err)
			t.Cleanup(func() { r.Close() })
			src, err := r.New(ctx, nil)
			require.NoError(t, err)
			st, err := checkpoint.OpenSessionStore[int](r, src.ID)
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

// unlinkable wraps a Backend, and the child stores it returns, without
// Linker: a backend that cannot link.
type unlinkable struct{ checkpoint.Backend }

func (u unlinkable) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	b, err := u.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return unlinkable{b}, nil
}

// linkFails is a child store whose Link fails as across file systems.
type linkFails struct{ checkpoint.Backend }

func (l linkFails) Unwrap() checkpoint.Backend { return l.Backend }

func (l linkFails) RemoveChild(ctx context.Context, name string) error {
	return l.Backend.(storage.ChildRemover).RemoveChild(ctx, name)
}

func (l linkFails) Link(context.Context, checkpoint.Backend, string) (checkpoint.Object, error) {
	return checkpoint.Object{}, &os.LinkError{Op: "link", Err: syscall.EXDEV}
}

type linkFailsRoot struct{ linkFails }

func (l linkFailsRoot) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	b, err := l.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return linkFails{b}, nil
}

// TestForkLeavesTheWritersRollingFileItsVersion: a fork of a session whose
// writer is running leaves the writer's rolling file as it was: its next
// save replaces it without a conflict (a hard link to it would change its
// Version).
func TestForkLeavesTheWritersRollingFileItsVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, err := checkpoint.OpenSessions(t.TempDir(), checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(ctx, "a", nil)
	require.NoError(t, err)
	w, err := checkpoint.OpenSessionStore[int](r, "a", checkpoint.SaveEvery(10), checkpoint.WithRolling())
	require.NoError(t, err)
	defer w.Close()
	for step := int64(0); step <= 1; step++ { // step 0 numbered, 1 rolling
		_, _, err = w.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}

	// Past the change time of the rolling file's last save, so that a
	// hard link made by the fork would show in its Version.
	passChangeTimeOf(t, filepath.Join(r.Location(), "a", "step_last.json"), t.TempDir())
	_, err = r.Fork(ctx, "a", 1, nil)
	require.NoError(t, err)
	_, _, err = w.Tick(ctx, 2, 2)
	require.NoError(t, err, "the writer's rolling save after a fork")
}

// forkWhileWriting forks session src at the step its writer (write) has
// just reached, again and again, and checks that every fork that succeeds
// has Latest at that step: a running writer may make Fork fail, never lie.
func forkWhileWriting(t *testing.T, r *checkpoint.Sessions, src string, write func(step int64) error) {
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
	check := func(step int64, f checkpoint.Session) {
		t.Helper()
		fst, err := checkpoint.OpenSessionStore[int](r, f.ID, checkpoint.ReadOnly())
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
			require.ErrorIs(t, err, checkpoint.ErrNotFound)
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

// TestForkBesideRunningWriterWithRollingFile: a fork beside a writer that
// replaces its rolling file at every step fails or holds the step it asked
// for (forkWhileWriting).
func TestForkBesideRunningWriterWithRollingFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), checkpoint.WithRolling(), checkpoint.SaveEvery(1<<40))
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, src.ID)
	require.NoError(t, err)
	defer st.Close()
	_, _, err = st.Tick(ctx, 0, 0)
	require.NoError(t, err)
	forkWhileWriting(t, r, src.ID, func(step int64) error {
		_, _, err := st.Tick(ctx, step, int(step))
		return err
	})
}

// TestForkBesideRunningWriterThatPrunes: a fork beside a writer that
// prunes all but its last checkpoint fails or holds the step it asked for
// (forkWhileWriting).
func TestForkBesideRunningWriterThatPrunes(t *testing.T) {
	t.Parallel()
	skipUnderWine(t, "a save (a few file calls) outruns a fork (dozens, each a round trip to wineserver), so every fork can lose the race to the pruning writer")
	ctx := context.Background()
	r := openSessions(t, t.TempDir(), checkpoint.KeepLast(1))
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, src.ID)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Save(ctx, 0, 0)
	require.NoError(t, err)
	forkWhileWriting(t, r, src.ID, func(step int64) error {
		_, err := st.Save(ctx, step, int(step))
		return err
	})
}

// TestForkNeverMixesTwoHistories: a Fork beside a writer that rewrites
// history while the fork copies (Truncate, then the same steps saved
// again) fails, or holds the old steps or the new ones: never the old
// step 4 with the new step 5, a history the parent never held.
func TestForkNeverMixesTwoHistories(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, bt backendUnderTest) {
		if bt.local {
			skipUnderWine(t, wineKeepsRemovedNames)
		}
		ctx := context.Background()
		r := bt.openGated(t, nil)
		_, err := r.Create(ctx, "a", nil)
		require.NoError(t, err)
		playSession(t, r, "a", 5) // state of step n: 10n
		w, err := checkpoint.OpenSessionStore[int](r, "a")
		require.NoError(t, err)
		defer w.Close()

		at, proceed := make(chan struct{}), make(chan struct{})
		var once bool
		rF := bt.openGated(t, func(child, name string) error {
			if child == "001" && name == "step_00000004.json" && !once {
				once = true
				close(at)
				<-proceed
			}
			return nil
		})
		type result struct {
			s   checkpoint.Session
			err error
		}
		done := make(chan result, 1)
		go func() { s, err := rF.Fork(ctx, "a", 5, nil); done <- result{s, err} }()
		<-at // the fork read step 4 and is about to copy it, then 5
		_, err = w.Truncate(ctx, 3)
		require.NoError(t, err)
		for step := int64(4); step <= 5; step++ {
			_, err := w.Save(ctx, step, int(step)*100)
			require.NoError(t, err)
		}
		close(proceed)
		f := <-done
		if f.err != nil {
			t.Logf("fork failed: %v", f.err)
			return // Fork saw the rewrite: the promise holds
		}
		st, err := checkpoint.OpenSessionStore[int](r, f.s.ID, checkpoint.ReadOnly())
		require.NoError(t, err)
		defer st.Close()
		v4, _, err := st.Load(ctx, 4)
		require.NoError(t, err)
		v5, _, err := st.Load(ctx, 5)
		require.NoError(t, err)
		require.Truef(t, v4 == 40 && v5 == 50 || v4 == 400 && v5 == 500,
			"fork %s holds step 4 = %d and step 5 = %d: a history the parent never held", f.s.ID, v4, v5)
	})
}

// TestForkOfAPayloadStepCopiesItsPayload proves that a session of byte
// payloads forks at a payload's step: the fork's LatestPayload is that
// step's payload, byte for byte.
func TestForkOfAPayloadStepCopiesItsPayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir())
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[[]byte](r, src.ID)
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := st.SaveFrom(ctx, step, writeAll(payloadBytes(uint64(step), 1000)))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	fork, err := r.Fork(ctx, src.ID, 2, nil)
	require.NoError(t, err)
	fs, err := checkpoint.OpenSessionStore[[]byte](r, fork.ID)
	require.NoError(t, err)
	defer fs.Close()
	rd, info, err := fs.LatestPayload(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	b, err := readPayload(t, rd)
	require.NoError(t, err)
	require.Equal(t, payloadBytes(2, 1000), b)
}
