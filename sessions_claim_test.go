package checkpoint_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
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

// gatedDir is gated over a directory, passing RemoveChild on (a wrapper of
// the directory keeps its empty children).
type gatedDir struct{ gated }

func (g gatedDir) RemoveChild(ctx context.Context, name string) error {
	return g.Backend.(storage.ChildRemover).RemoveChild(ctx, name)
}

// checkpointsIn returns the names in b other than session.json and hidden
// ones: the checkpoints of a session's store.
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

// backendUnderTest is the storage a test of claims runs over: open returns
// a new handle on it, as another process would hold; opts are the options
// of a root over it; gate wraps a handle in gated with hook, passing on
// what a wrapper of that storage must pass on.
type backendUnderTest struct {
	local bool // the local directory
	open  func() (checkpoint.Backend, error)
	opts  []checkpoint.Option
	gate  func(b checkpoint.Backend, hook func(child, name string) error) checkpoint.Backend
}

// forEachBackend runs test over a backendtest.Mem (an object store's
// semantics) and over a local directory.
func forEachBackend(t *testing.T, test func(t *testing.T, bt backendUnderTest)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		m := backendtest.NewMem(backendtest.MemNoSync())
		test(t, backendUnderTest{
			open: m.Open,
			gate: func(b checkpoint.Backend, hook func(child, name string) error) checkpoint.Backend {
				return gated{Backend: b, hook: hook}
			},
		})
	})
	t.Run("directory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		test(t, backendUnderTest{
			local: true,
			open:  func() (checkpoint.Backend, error) { return dirstore.Open(dir, dirstore.NoSync()) },
			opts:  []checkpoint.Option{checkpoint.NoSync()},
			gate: func(b checkpoint.Backend, hook func(child, name string) error) checkpoint.Backend {
				return gatedDir{gated{Backend: b, hook: hook}}
			},
		})
	})
}

// openRoot opens a root of sessions over a new handle on bt, and closes it
// when t ends.
func (bt backendUnderTest) openRoot(t *testing.T) *checkpoint.Sessions {
	t.Helper()
	b, err := bt.open()
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(b, bt.opts...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// openGated opens a root of sessions over a new handle on bt gated by hook
// (nil: none), and closes it when t ends.
func (bt backendUnderTest) openGated(t *testing.T, hook func(child, name string) error) *checkpoint.Sessions {
	t.Helper()
	b, err := bt.open()
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(bt.gate(b, hook), bt.opts...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// TestConcurrentNewSessionsGetDistinctIDs: News from two roots on one
// directory (two processes), eight at a time, give every session an ID of
// its own, numbered without a gap.
func TestConcurrentNewSessionsGetDistinctIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// Two roots on one directory stand for two processes.
	roots := []*checkpoint.Sessions{openSessions(t, dir), openSessions(t, dir)}
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

// TestConcurrentCreateSucceedsOrSaysExists: of two Creates of one ID, the
// one that goes on over the other's claim succeeds, or fails with
// ErrExists, when the other fails and removes its claim (and, in a
// directory, the child store it made).
func TestConcurrentCreateSucceedsOrSaysExists(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, bt backendUnderTest) {
		ctx := context.Background()
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
		rA := bt.openGated(t, at(aAt, aGo, errors.New("injected: A's caller gave up")))
		rB := bt.openGated(t, at(bAt, bGo, nil))
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
	})
}

// TestCreatedSessionNeverHoldsAForksCheckpoints: while a Create goes on
// over another creation's claim of an ID, and that creation fails and
// removes its claim, a Fork never fills the ID under the Create: it takes
// another number, or the Create publishes no session.json over the fork's
// checkpoints. The session Create returns holds no checkpoint, and holds
// none if the fork is killed at once.
func TestCreatedSessionNeverHoldsAForksCheckpoints(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, bt backendUnderTest) {
		ctx := context.Background()
		setup := bt.openGated(t, nil)
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
		rA := bt.openGated(t, at(aAt, aGo, errors.New("injected: A fails to publish")))
		rB := bt.openGated(t, at(bAt, bGo, nil))
		rF := bt.openGated(t, at(fAt, fGo, nil))

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
	})
}

// TestLosingClaimRaceLeavesNoClaimInASession: a Fork that finds no
// session.json in an ID, then loses the ID to a New that publishes its
// session there, leaves no claim in that live session; once the session's
// session.json is lost, RemoveStaging leaves its checkpoints (a child store
// without a fork's claim is never touched, and no session is).
func TestLosingClaimRaceLeavesNoClaimInASession(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, bt backendUnderTest) {
		if bt.local {
			skipUnderWine(t, wineKeepsRemovedNames)
		}
		ctx := context.Background()
		r := bt.openGated(t, nil)
		_, err := r.Create(ctx, "001", nil)
		require.NoError(t, err)
		playSession(t, r, "001", 1)

		fAt, fGo := make(chan struct{}), make(chan struct{})
		rF := bt.openGated(t, func(child, name string) error {
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
		b, err := bt.open()
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
	})
}

// TestCreateTakesOverACrashedCreationsClaim: a Create of an ID whose
// creation a crash interrupted after its claim takes the claim over and
// makes the session, leaving only its session.json; a fork's claim is
// never taken over.
func TestCreateTakesOverACrashedCreationsClaim(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, bt backendUnderTest) {
		ctx := context.Background()
		raw, err := bt.open()
		require.NoError(t, err)
		defer raw.Close()
		for id, op := range map[string]string{"run": "create", "forked": "fork"} {
			sub, err := raw.Sub(ctx, id, true)
			require.NoError(t, err)
			_, err = sub.Create(ctx, ".session.claim", func(w io.Writer) error {
				_, err := io.WriteString(w, `{"op":"`+op+`","token":"x"}`)
				return err
			})
			require.NoError(t, err)
			require.NoError(t, sub.Close())
		}
		r := bt.openRoot(t)
		s, err := r.Create(ctx, "run", nil)
		require.NoError(t, err)
		require.Equal(t, "run", s.ID)
		sub, err := raw.Sub(ctx, "run", false)
		require.NoError(t, err)
		defer sub.Close()
		objs, err := sub.List(ctx)
		require.NoError(t, err)
		require.Len(t, objs, 1, "only session.json stays")
		require.Equal(t, "session.json", objs[0].Name)
		_, err = r.Create(ctx, "forked", nil)
		require.ErrorIs(t, err, checkpoint.ErrExists)
	})
}

// TestRemoveStagingTakesNoClaimBesideASessionForAFork: a fork's claim that
// a crash left beside the session.json it published (the crash came
// between the two) is removed by RemoveStaging, so that the session, once
// its session.json is lost, is listed as damaged and keeps its
// checkpoints, instead of being taken for a fork a crash interrupted.
func TestRemoveStagingTakesNoClaimBesideASessionForAFork(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, bt backendUnderTest) {
		ctx := context.Background()
		r := bt.openRoot(t)
		_, err := r.Create(ctx, "a", nil)
		require.NoError(t, err)
		playSession(t, r, "a", 2)
		raw, err := bt.open()
		require.NoError(t, err)
		defer raw.Close()
		sub, err := raw.Sub(ctx, "a", false)
		require.NoError(t, err)
		defer sub.Close()
		_, err = sub.Create(ctx, ".session.claim", func(w io.Writer) error {
			_, err := io.WriteString(w, `{"op":"fork","token":"x"}`)
			return err
		})
		require.NoError(t, err)

		removed, err := r.RemoveStaging(ctx)
		require.NoError(t, err)
		require.Empty(t, removed, "a live session is no fork's leftover")
		_, err = sub.Remove(ctx, "session.json") // lost, by hand
		require.NoError(t, err)
		removed, err = r.RemoveStaging(ctx)
		require.NoError(t, err)
		require.Empty(t, removed)
		require.Len(t, checkpointsIn(t, sub), 2, "RemoveStaging deleted the checkpoints of a session")
		s, err := r.Get(ctx, "a")
		require.ErrorIs(t, err, checkpoint.ErrCorrupt, "a session without its session.json is listed as damaged")
		require.Equal(t, 2, s.Checkpoints)
	})
}

// TestClaimOrTombstoneIsNoSession: what a crashed creation or fork leaves
// where there is no session (its claim, RemoveStaging's tombstone) is no
// session, to a directory opened by OpenSessions as by
// OpenSessionsBackend.
func TestClaimOrTombstoneIsNoSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	generic, err := checkpoint.OpenSessionsBackend(b, checkpoint.NoSync())
	require.NoError(t, err)
	defer generic.Close()
	write := func(data string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, data); return err }
	}
	// A fork that crashed after its claim and a first copy (session 7),
	// and a creation that crashed after its claim (session 8).
	for _, id := range []string{"7", "8"} {
		sub, err := b.Sub(ctx, id, true)
		require.NoError(t, err)
		defer sub.Close()
		op := map[string]string{"7": "fork", "8": "create"}[id]
		_, err = sub.Create(ctx, ".session.claim", write(`{"op":"`+op+`","token":"x"}`))
		require.NoError(t, err)
		if id == "7" {
			_, err = sub.Create(ctx, "step_00000001.json", write(`{}`))
			require.NoError(t, err)
		}
	}
	local, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer local.Close()
	require.Empty(t, listedIDs(t, local), "a claim without session.json is no session")
	_, err = generic.RemoveStaging(ctx) // leaves a tombstone in 7
	require.NoError(t, err)
	require.Empty(t, listedIDs(t, local), "a tombstone is no session")
	require.Empty(t, listedIDs(t, generic))
}

// TestCreationWhoseClaimWasTakenOverNeverSharesTheSession: a creation
// whose claim another creation took over after its check, and whose
// session.json would be byte for byte the other's (one ID, one clock
// tick, no metadata: two News on a coarse clock), fails with ErrExists
// instead of taking the other's session.json for its own: two calls
// never return one session.
func TestCreationWhoseClaimWasTakenOverNeverSharesTheSession(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, bt backendUnderTest) {
		ctx := context.Background()
		tick := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		bt.opts = append(slices.Clone(bt.opts), checkpoint.WithClock(func() time.Time { return tick }))
		aAt, aGo := make(chan struct{}), make(chan struct{})
		rA := bt.openGated(t, func(child, name string) error {
			if child == "run" && name == "session.json" {
				close(aAt)
				<-aGo
			}
			return nil
		})
		rB := bt.openGated(t, func(string, string) error { return nil })
		aDone := make(chan error, 1)
		go func() { _, err := rA.Create(ctx, "run", nil); aDone <- err }()
		<-aAt                                // A checked its claim and is about to publish
		_, err := rB.Create(ctx, "run", nil) // B takes A's claim over and publishes
		require.NoError(t, err)
		close(aGo)
		require.ErrorIs(t, <-aDone, checkpoint.ErrExists, "both creations returned session run")
	})
}
