package checkpoint_test

import (
	"context"
	"errors"
	"github.com/gocheckpoint/checkpoint/storage"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// gated wraps a Backend and calls hook before each Create of a child
// store's object; hook may block, fail the call (non-nil error) or let it
// through.
type gated struct {
	checkpoint.Backend
	child string
	hook  func(child, name string) error
}

func (g gated) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	if g.hook != nil {
		if err := g.hook(g.child, name); err != nil {
			return checkpoint.Object{}, err
		}
	}
	return g.Backend.Create(ctx, name, write)
}

func (g gated) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	b, err := g.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return gated{Backend: b, child: name, hook: g.hook}, nil
}

// TestCreatedSessionNeverHoldsAForksCheckpoints: a Create that goes on over
// another creation's claim holds no claim of its own; when that creation
// fails and removes its claim, a Fork claims the same ID and fills it, and
// the Create publishes session.json over the fork's checkpoints. The new,
// empty session then shows the parent's checkpoints (and keeps them if the
// fork is killed before it cleans up): two sessions were made in one ID.
func TestCreatedSessionNeverHoldsAForksCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemNoSync())
	open := func(hook func(child, name string) error) *checkpoint.Sessions {
		b, err := m.Open()
		require.NoError(t, err)
		r, err := checkpoint.OpenSessionsBackend(gated{Backend: b, hook: hook})
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		return r
	}
	setup := open(nil)
	_, err := setup.Create(ctx, "001", nil)
	require.NoError(t, err)
	playSession(t, setup, "001", 2)

	aAt, aGo := make(chan struct{}), make(chan struct{})
	bAt, bGo := make(chan struct{}), make(chan struct{})
	fAt, fGo := make(chan struct{}), make(chan struct{})
	defer close(fGo)
	at := func(ch, gate chan struct{}, fail error) func(child, name string) error {
		return func(child, name string) error {
			if child != "002" || name != "session.json" {
				return nil
			}
			close(ch)
			<-gate
			return fail
		}
	}
	rA := open(at(aAt, aGo, errors.New("injected: A fails to publish")))
	rB := open(at(bAt, bGo, nil))
	rF := open(at(fAt, fGo, nil))

	aDone := make(chan error, 1)
	go func() { _, err := rA.New(ctx, nil); aDone <- err }()
	<-aAt // A holds the claim of 002 and is about to publish
	type result struct {
		s   checkpoint.Session
		err error
	}
	bDone := make(chan result, 1)
	go func() { s, err := rB.Create(ctx, "002", nil); bDone <- result{s, err} }()
	<-bAt // B went on over A's claim
	close(aGo)
	require.Error(t, <-aDone) // A fails and removes its claim
	fDone := make(chan result, 1)
	go func() { s, err := rF.Fork(ctx, "001", 2, nil); fDone <- result{s, err} }()
	select {
	case <-fAt: // F claimed 002 and filled it: B must not publish over it
	case r := <-fDone:
		// B holds the claim of 002: the fork takes the next number.
		require.NoError(t, r.err)
		require.NotEqual(t, "002", r.s.ID, "the fork took the ID a Create holds")
	}
	close(bGo)
	b := <-bDone
	require.NoError(t, b.err)
	require.Equal(t, "002", b.s.ID)
	// What a kill -9 of the fork at this instant leaves for good:
	got, err := setup.Get(ctx, "002")
	require.NoError(t, err)
	require.Zero(t, got.Checkpoints, "the session Create made holds checkpoints it never saved (the fork's)")
	require.Zero(t, b.s.Checkpoints, "Create returned a session holding the fork's checkpoints")
}

// TestLosingClaimRaceLeavesNoClaimInASession: a Fork that finds no
// session.json, then creates its claim just after a New published 002 and
// removed its own claim, sees session.json and gives up without removing
// its claim. The live session 002 then holds a fork's claim: once its
// session.json is lost, List hides the session (instead of listing it
// damaged) and RemoveStaging deletes its checkpoints, though "a child store
// without a fork's claim is never touched, and no session is".
func TestLosingClaimRaceLeavesNoClaimInASession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemNoSync())
	open := func(hook func(child, name string) error) *checkpoint.Sessions {
		b, err := m.Open()
		require.NoError(t, err)
		r, err := checkpoint.OpenSessionsBackend(gated{Backend: b, hook: hook})
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		return r
	}
	r := open(nil)
	_, err := r.Create(ctx, "001", nil)
	require.NoError(t, err)
	playSession(t, r, "001", 1)

	fAt, fGo := make(chan struct{}), make(chan struct{})
	rF := open(func(child, name string) error {
		if child == "002" && name == ".session.claim" {
			close(fAt)
			<-fGo
		}
		return nil
	})
	type result struct {
		s   checkpoint.Session
		err error
	}
	fDone := make(chan result, 1)
	go func() { s, err := rF.Fork(ctx, "001", 1, nil); fDone <- result{s, err} }()
	<-fAt // F saw no session.json in 002 and is about to claim it
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "002", s.ID)
	close(fGo)
	f := <-fDone
	require.NoError(t, f.err)
	require.Equal(t, "003", f.s.ID)

	playSession(t, r, "002", 2)
	b, err := m.Open()
	require.NoError(t, err)
	defer b.Close()
	sub, err := b.Sub(ctx, "002", false)
	require.NoError(t, err)
	objs, err := sub.List(ctx)
	require.NoError(t, err)
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	// The session.json is lost (deleted by hand, say): a damaged session,
	// which must stay listed and untouched.
	_, err = sub.Remove(ctx, "session.json")
	require.NoError(t, err)
	_, err = r.RemoveStaging(ctx)
	require.NoError(t, err)
	after := checkpointsIn(t, sub)
	require.Len(t, after, 2, "RemoveStaging deleted the checkpoints of session 002")
	require.NotContains(t, names, ".session.claim", "a claim left in the live session 002")
}

func checkpointsIn(t *testing.T, b checkpoint.Backend) []string {
	t.Helper()
	objs, err := b.List(context.Background())
	require.NoError(t, err)
	var out []string
	for _, o := range objs {
		if o.Name != "session.json" && o.Name[0] != '.' {
			out = append(out, o.Name)
		}
	}
	return out
}

// gatedDir is gated over a directory, passing RemoveChild on (a wrapper of
// the directory keeps its empty children).
type gatedDir struct{ gated }

func (g gatedDir) RemoveChild(ctx context.Context, name string) error {
	return g.Backend.(storage.ChildRemover).RemoveChild(ctx, name)
}

// TestConcurrentCreateSucceedsOrSaysExists: of two Creates of one ID, the
// one that goes on over the other's claim must succeed, or fail with
// ErrExists, when the other fails: here the failing one removes its claim
// and the (empty) directory under the first, whose session.json then
// cannot be created (ENOENT), and neither Create succeeds.
func TestConcurrentCreateSucceedsOrSaysExists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	open := func(hook func(child, name string) error) *checkpoint.Sessions {
		b, err := checkpoint.OpenDir(dir, checkpoint.NoSync())
		require.NoError(t, err)
		r, err := checkpoint.OpenSessionsBackend(gatedDir{gated{Backend: b, hook: hook}}, checkpoint.NoSync())
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		return r
	}
	aAt, aGo := make(chan struct{}), make(chan struct{})
	bAt, bGo := make(chan struct{}), make(chan struct{})
	at := func(ch, gate chan struct{}, fail error) func(child, name string) error {
		return func(child, name string) error {
			if child != "run" || name != "session.json" {
				return nil
			}
			close(ch)
			<-gate
			return fail
		}
	}
	rA := open(at(aAt, aGo, errors.New("injected: A's caller gave up")))
	rB := open(at(bAt, bGo, nil))
	aDone := make(chan error, 1)
	go func() { _, err := rA.Create(ctx, "run", nil); aDone <- err }()
	<-aAt
	bDone := make(chan error, 1)
	go func() { _, err := rB.Create(ctx, "run", nil); bDone <- err }()
	<-bAt // B went on over A's claim
	close(aGo)
	require.Error(t, <-aDone)
	close(bGo)
	err := <-bDone
	if err != nil {
		require.ErrorIs(t, err, checkpoint.ErrExists, "B's Create failed with neither success nor ErrExists")
	}
}

// TestForkNeverMixesTwoHistories: a writer that rewrites history
// (Truncate, then saves the same steps again) while Fork copies must not
// leave a fork holding the old step 4 and the new step 5, a history the
// parent never held; "if it prunes or replaces what Fork takes, Fork
// fails".
func TestForkNeverMixesTwoHistories(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemNoSync())
	open := func(hook func(child, name string) error) *checkpoint.Sessions {
		b, err := m.Open()
		require.NoError(t, err)
		r, err := checkpoint.OpenSessionsBackend(gated{Backend: b, hook: hook})
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		return r
	}
	r := open(nil)
	_, err := r.Create(ctx, "a", nil)
	require.NoError(t, err)
	playSession(t, r, "a", 5) // state of step n: 10n
	w, err := checkpoint.OpenSessionStore[int](r, "a")
	require.NoError(t, err)
	defer w.Close()

	at, proceed := make(chan struct{}), make(chan struct{})
	var once bool
	rF := open(func(child, name string) error {
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
}

// passThrough is the trivial wrapper a host writes around a backend (a
// tracer), saying what it wraps (storage.Wrapper).
type passThrough struct{ checkpoint.Backend }

func (p passThrough) Unwrap() checkpoint.Backend { return p.Backend }

// TestSessionsOverAWrappedDirectoryCleanLikeTheDirectory: a root of
// sessions over a pass-through wrapper of a directory that an earlier
// release wrote: New removes the lock file and the staging directory, as
// OpenSessions does, and RemoveStaging reports a staging directory once.
func TestSessionsOverAWrappedDirectoryCleanLikeTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".sessions.lock"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".staging-K3J9QZ"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".staging-K3J9QZ", "step_00000001.json"), []byte("x"), 0o644))
	b, err := checkpoint.OpenDir(dir, checkpoint.NoSync())
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(passThrough{b}, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	first, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	second, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	_, err = os.Lstat(filepath.Join(dir, ".staging-K3J9QZ"))
	require.ErrorIs(t, err, os.ErrNotExist, "the staging directory stays (RemoveStaging said %v, then %v)", first, second)
	require.Empty(t, second, "RemoveStaging reports the same staging directory removed again")
}
