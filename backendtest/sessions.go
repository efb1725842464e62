package backendtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

// RunSessions checks Sessions (OpenSessionsBackend) on the backends
// newBackend returns: each call gives a fresh, empty backend that the test
// owns (the suite opens the child store "campaign" in it as its root of
// sessions, once per simulated worker). Every subtest runs in parallel.
// A backend that passes Run should pass RunSessions; run it to check that
// sessions, which create, replace and list across child stores, work on
// yours:
//
//	func TestSessions(t *testing.T) {
//		backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
//			b, err := dirstore.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return b
//		})
//	}
func RunSessions(t *testing.T, newBackend func(t *testing.T) checkpoint.Backend) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, w workers)
	}{
		{"CreateListGetResume", testBackendSessionsCreateListGetResume},
		{"ConcurrentCreatesOfOneIDHaveOneWinner", testBackendConcurrentCreatesOfOneID},
		{"CreateOvertakenByAnotherCreateFails", testBackendCreateOvertaken},
		{"ConcurrentNewGivesDistinctIDs", testBackendConcurrentNewGivesDistinctIDs},
		{"ForkCopiesHistoryUpToStep", testBackendForkCopiesHistoryUpToStep},
		{"FailedForkLeavesNoSessionAndRetryWorks", testBackendFailedForkLeavesNoSession},
		{"CrashedForkIsInvisibleNotAdoptedAndRemoved", testBackendCrashedForkLeftovers},
		{"ForkAbandonedMidwayNeverPublishesPartly", testBackendForkAbandonedMidway},
		{"CreateAfterCrashedCreateWorks", testBackendCreateAfterCrashedCreate},
		{"CreateDoesNotAdoptForeignCheckpoints", testBackendCreateDoesNotAdoptForeign},
		{"SetMetaRetriesOnConflict", testBackendSetMetaRetriesOnConflict},
		{"SetMetaDoesNotBringBackRemovedSession", testBackendSetMetaDoesNotResurrect},
		{"SetMetaGivesUpOnEndlessConflicts", testBackendSetMetaEndlessConflicts},
		{"SecondWriterOfOneSessionIsLocked", testBackendSecondWriterIsLocked},
		{"WaitLockWaitsForTheWriter", testBackendWaitLockWaitsForTheWriter},
		{"AppendTakesTheNextStep", testBackendAppendTakesTheNextStep},
		{"MissingDamagedAndInvalidSessions", testBackendMissingDamagedInvalid},
		{"ReadOnlyRootChangesNothing", testBackendReadOnlyRoot},
		{"CloseClosesEveryBackendItOpened", testBackendCloseClosesWhatItOpened},
		{"MetricsAndKeepBestInASession", testBackendMetricsAndKeepBest},
		{"ConcurrentDeletesOfOneIDFailCleanly", testBackendConcurrentDeletesOfOneID},
		{"AnyStringIsASessionID", testBackendAnyStringIsASessionID},
		{"MappedNameIsCheckedAgainstItsID", testBackendMappedNameIsCheckedAgainstItsID},
		{"EarlierReleasesSessionOfAWindowsNameOpens", testBackendEarlierReleasesSessionOfAWindowsNameOpens},
		{"DeleteRemovesEverything", testBackendDeleteRemovesEverything},
		{"DeleteWhileWriterHoldsSessionIsLocked", testBackendDeleteWhileWriterIsLocked},
		{"DeleteRacingWriterOpeningHasOneOutcome", testBackendDeleteRacesWriterOpening},
		{"InterruptedDeleteIsHiddenAndFinishedLater", testBackendInterruptedDeleteIsHiddenAndFinished},
		{"DeleteRemovesDamagedSessionPruneIdleNever", testBackendDeleteDamagedSession},
		{"PruneIdleSkipsHeldAndPinnedSessions", testBackendPruneIdleSkipsHeldAndPinned},
		{"CreateRacingDeleteOfTheSameID", testBackendCreateRacingDeleteOfTheSameID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newWorkers(t, newBackend(t)))
		})
	}
}

// workers opens roots of sessions on one backend, each as a worker of its
// own would: the root is the child store "campaign", reached through a
// Backend of its own for each worker.
type workers struct {
	b     checkpoint.Backend
	hooks *backendHooks
}

func newWorkers(t *testing.T, b checkpoint.Backend) workers {
	t.Cleanup(func() { b.Close() }) // after every worker's Close (cleanups run last first)
	return workers{b: b, hooks: &backendHooks{}}
}

// root returns the campaign's backend, as a worker's own; with hooks, its
// calls go through w.hooks.
func (w workers) root(t *testing.T, hooked bool) checkpoint.Backend {
	t.Helper()
	sub, err := w.b.Sub(context.Background(), "campaign", false)
	req.NoError(t, err)
	if hooked {
		w.hooks.mu.Lock()
		w.hooks.open++
		w.hooks.mu.Unlock()
		return &hookBackend{Backend: sub, h: w.hooks}
	}
	return sub
}

// open opens a worker's root of sessions.
func (w workers) open(t *testing.T, opts ...checkpoint.Option) *checkpoint.Sessions {
	t.Helper()
	return w.openOn(t, w.root(t, false), opts...)
}

// openHooked opens a worker's root whose backend calls go through w.hooks.
func (w workers) openHooked(t *testing.T, opts ...checkpoint.Option) *checkpoint.Sessions {
	t.Helper()
	return w.openOn(t, w.root(t, true), opts...)
}

func (w workers) openOn(t *testing.T, b checkpoint.Backend, opts ...checkpoint.Option) *checkpoint.Sessions {
	t.Helper()
	r, err := checkpoint.OpenSessionsBackend(b, append([]checkpoint.Option{checkpoint.WithLayout("turn", 3)}, opts...)...)
	req.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// child returns the backend of the session id as the test sees it, to
// look under the API.
func (w workers) child(t *testing.T, id string) checkpoint.Backend {
	t.Helper()
	root := w.root(t, false)
	t.Cleanup(func() { root.Close() })
	c, err := root.Sub(context.Background(), id, false)
	req.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// objectNames returns the names of the objects in b, but those starting
// with a dot (a lock, a lease, temporary files, a session's claim) unless
// hidden is true.
func objectNames(t *testing.T, b checkpoint.Backend, hidden bool) []string {
	t.Helper()
	objs, err := b.List(context.Background())
	req.NoError(t, err)
	var names []string
	for _, o := range objs {
		if hidden || !strings.HasPrefix(o.Name, ".") {
			names = append(names, o.Name)
		}
	}
	slices.Sort(names)
	return names
}

func listedIDs(t *testing.T, r *checkpoint.Sessions) []string {
	t.Helper()
	list, err := r.List(context.Background())
	req.NoError(t, err)
	var ids []string
	for _, s := range list {
		req.NoError(t, s.Err, s.ID)
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

// newPlayedSession makes a session with New and saves steps 1 to last in
// it.
func newPlayedSession(t *testing.T, r *checkpoint.Sessions, last int64) checkpoint.Session {
	t.Helper()
	s, err := r.New(context.Background(), nil)
	req.NoError(t, err)
	playSession(t, r, s.ID, last)
	return s
}

// playSession saves steps 1 to last in the session id.
func playSession(t *testing.T, r *checkpoint.Sessions, id string, last int64) {
	t.Helper()
	st, err := checkpoint.OpenSessionStore[int](r, id)
	req.NoError(t, err)
	for step := int64(1); step <= last; step++ {
		_, err := st.Save(context.Background(), step, int(step)*10)
		req.NoError(t, err)
	}
	req.NoError(t, st.Close())
}

func testBackendSessionsCreateListGetResume(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)

	_, _, err := checkpoint.ResumeLatestSession[int](ctx, r)
	req.ErrorIs(t, err, checkpoint.ErrNotFound, "no session yet")

	var ids []string
	for range 2 {
		s, err := r.New(ctx, map[string]string{"players": "3"})
		req.NoError(t, err)
		req.NoError(t, s.Err)
		req.Equal(t, "3", s.Meta["players"])
		req.False(t, s.Created.IsZero())
		ids = append(ids, s.ID)
	}
	req.Equal(t, []string{"001", "002"}, ids)
	s, err := r.Create(ctx, "run-a", nil)
	req.NoError(t, err)
	req.Equal(t, "run-a", s.ID)
	s, err = r.New(ctx, nil)
	req.NoError(t, err)
	req.Equal(t, "003", s.ID, "numbering skips a named session")

	playSession(t, r, "001", 3)
	list, err := r.List(ctx)
	req.NoError(t, err)
	req.Equal(t, "001", list[0].ID, "the session played last is the most recently active")
	req.Equal(t, 3, list[0].Checkpoints)
	req.Equal(t, int64(3), list[0].LastStep)

	// Another worker resumes it: the most recently active session.
	other := w.open(t)
	st, got, err := checkpoint.ResumeLatestSession[int](ctx, other)
	req.NoError(t, err)
	req.Equal(t, "001", got.ID)
	req.Equal(t, got.Dir, st.Location(), "Session.Dir is where its store is")
	v, info, err := st.Latest(ctx)
	req.NoError(t, err)
	req.Equal(t, int64(3), info.Step)
	req.Equal(t, 30, v)
	req.NoError(t, st.Close())

	// Metadata written to 002 makes it the most recently active.
	req.NoError(t, other.SetMeta(ctx, "002", map[string]string{"players": "4"}))
	g, err := r.Get(ctx, "002")
	req.NoError(t, err)
	req.Equal(t, map[string]string{"players": "4"}, g.Meta)
	st, got, err = checkpoint.ResumeLatestSession[int](ctx, r)
	req.NoError(t, err)
	req.Equal(t, "002", got.ID)
	req.NoError(t, st.Close())
	req.Equal(t, []string{"001", "002", "003", "run-a"}, listedIDs(t, r))
}

// A session's checkpoints carry their metrics (WithMetric) to another
// worker, and KeepBest keeps the best of them, the newest, and the one the
// writer resumed from.
func testBackendMetricsAndKeepBest(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	_, err := r.Create(ctx, "train", nil)
	req.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, "train")
	req.NoError(t, err)
	for step, loss := range []float64{4, 9, 1, 8} {
		_, err := st.Save(ctx, int64(step+1), step, checkpoint.WithMetric("loss", loss), checkpoint.WithMetric("acc", 1/loss))
		req.NoError(t, err)
	}
	req.NoError(t, st.Close())

	// Another worker resumes the session from step 2 with KeepBest.
	other := w.open(t, checkpoint.KeepBest(1, "loss", checkpoint.Minimize))
	st, err = checkpoint.OpenSessionStore[int](other, "train")
	req.NoError(t, err)
	_, info, err := st.Load(ctx, 2)
	req.NoError(t, err)
	req.Equal(t, map[string]float64{"loss": 9, "acc": 1.0 / 9}, info.Metrics)
	_, err = st.Save(ctx, 5, 5, checkpoint.WithMetric("loss", 2))
	req.NoError(t, err)
	list, err := st.List(ctx)
	req.NoError(t, err)
	var steps []int64
	for _, i := range list {
		steps = append(steps, i.Step)
	}
	req.Equal(t, []int64{2, 3, 5}, steps, "the one resumed from, the best, the newest")
	req.Equal(t, map[string]float64{"loss": 1, "acc": 1}, list[1].Metrics)
	req.NoError(t, st.Close())
}

func testBackendConcurrentCreatesOfOneID(t *testing.T, w workers) {
	ids := []string{"run-42", "user:42/thread#7"} // its own name, and a mapped one
	for _, id := range ids {
		concurrentCreatesOfOneID(t, w, id)
	}
	req.Equal(t, ids, listedIDs(t, w.open(t)), "one session per ID")
}

func concurrentCreatesOfOneID(t *testing.T, w workers, id string) {
	ctx := context.Background()
	const n = 16
	roots := make([]*checkpoint.Sessions, n)
	for i := range roots {
		roots[i] = w.open(t)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = roots[i].Create(ctx, id, map[string]string{"worker": fmt.Sprint(i)})
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			req.Equal(t, -1, winner, "two creates of one ID succeeded: %d and %d", winner, i)
			winner = i
			continue
		}
		req.ErrorIs(t, err, checkpoint.ErrExists, "worker %d", i)
	}
	req.NotEqual(t, -1, winner, "no create succeeded")
	s, err := roots[0].Get(ctx, id)
	req.NoError(t, err)
	req.Equal(t, fmt.Sprint(winner), s.Meta["worker"], "the session is the winner's")
	req.Contains(t, listedIDs(t, roots[0]), id)
}

// testBackendCreateOvertaken makes the race of two Creates of one ID go
// the same way every time: the second runs whole between the first's claim
// and its session.json.
func testBackendCreateOvertaken(t *testing.T, w workers) {
	ctx := context.Background()
	r, other := w.openHooked(t), w.open(t)
	var once sync.Once
	w.hooks.setBeforeCreate(func(name string) error {
		if name == "session.json" {
			once.Do(func() {
				_, err := other.Create(ctx, "run-1", map[string]string{"by": "other"})
				req.NoError(t, err, "the claim of a Create in progress does not stop another")
			})
		}
		return nil
	})
	_, err := r.Create(ctx, "run-1", map[string]string{"by": "first"})
	req.ErrorIs(t, err, checkpoint.ErrExists)
	s, err := r.Get(ctx, "run-1")
	req.NoError(t, err)
	req.Equal(t, "other", s.Meta["by"], "the winner's session.json stands")

	// New goes on to the next number when overtaken.
	once = sync.Once{}
	w.hooks.setBeforeCreate(func(name string) error {
		if name == "session.json" {
			once.Do(func() {
				_, err := other.Create(ctx, "001", map[string]string{"by": "other"})
				req.NoError(t, err)
			})
		}
		return nil
	})
	n, err := r.New(ctx, map[string]string{"by": "new"})
	req.NoError(t, err)
	req.Equal(t, "002", n.ID)
	req.Equal(t, "new", n.Meta["by"])
	req.Equal(t, []string{"001", "002", "run-1"}, listedIDs(t, r))
}

func testBackendConcurrentNewGivesDistinctIDs(t *testing.T, w workers) {
	ctx := context.Background()
	const workersN, each = 8, 3
	ids := make([][]string, workersN)
	var wg sync.WaitGroup
	for i := range workersN {
		r := w.open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				s, err := r.New(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = append(ids[i], s.ID)
			}
		}()
	}
	wg.Wait()
	var all []string
	for _, l := range ids {
		all = append(all, l...)
	}
	slices.Sort(all)
	req.Len(t, slices.Compact(slices.Clone(all)), workersN*each, "IDs given twice: %v", all)
	req.Equal(t, all, listedIDs(t, w.open(t)))
}

func testBackendForkCopiesHistoryUpToStep(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	src := newPlayedSession(t, r, 5)

	f, err := r.Fork(ctx, src.ID, 3, map[string]string{"branch": "b"})
	req.NoError(t, err)
	req.NoError(t, f.Err)
	req.Equal(t, "002", f.ID)
	req.Equal(t, src.ID, f.Parent)
	req.Equal(t, int64(3), f.ParentStep)
	req.Equal(t, 3, f.Checkpoints)
	req.Equal(t, int64(3), f.LastStep)
	req.Equal(t, "b", f.Meta["branch"])

	st, err := checkpoint.OpenSessionStore[int](r, f.ID)
	req.NoError(t, err)
	v, info, err := st.Latest(ctx)
	req.NoError(t, err)
	req.Equal(t, int64(3), info.Step)
	req.Equal(t, 30, v)
	_, err = st.Save(ctx, 4, 400) // the fork goes its own way
	req.NoError(t, err)
	req.NoError(t, st.Close())

	s, err := r.Get(ctx, src.ID)
	req.NoError(t, err)
	req.Equal(t, 5, s.Checkpoints, "the source is untouched")
	srcStore, err := checkpoint.OpenSessionStore[int](r, src.ID, checkpoint.ReadOnly())
	req.NoError(t, err)
	v, _, err = srcStore.Load(ctx, 4)
	req.NoError(t, err)
	req.Equal(t, 40, v, "the fork's step 4 is its own")
	req.NoError(t, srcStore.Close())

	_, err = r.Fork(ctx, src.ID, 9, nil)
	req.ErrorIs(t, err, checkpoint.ErrNotFound, "a step that was never saved")
	_, err = r.Fork(ctx, "nope", 1, nil)
	req.ErrorIs(t, err, checkpoint.ErrNotFound)
	req.Equal(t, []string{"001", "002"}, listedIDs(t, r), "failed forks make nothing")
}

func testBackendFailedForkLeavesNoSession(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	src := newPlayedSession(t, r, 4)

	// The fork creates its claim, then copies checkpoints: the third
	// Create (the second checkpoint) fails.
	for _, nth := range []int{1, 2, 3, 5, 6} {
		w.hooks.failNthCreate(nth)
		_, err := r.Fork(ctx, src.ID, 4, nil)
		req.ErrorIs(t, err, errInjected, "create %d", nth)
		req.Equal(t, []string{src.ID}, listedIDs(t, r), "create %d failed: no new session is visible", nth)
		_, err = r.Get(ctx, "002")
		req.ErrorIs(t, err, checkpoint.ErrNotFound)
	}
	w.hooks.failNthCreate(0)
	f, err := r.Fork(ctx, src.ID, 4, nil)
	req.NoError(t, err, "a retry works")
	req.Equal(t, 4, f.Checkpoints)
	req.Equal(t, []string{src.ID, f.ID}, listedIDs(t, r))
}

func testBackendCrashedForkLeftovers(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	src := newPlayedSession(t, r, 3)

	// A crash mid-fork: the third Create fails and so does the removal of
	// what the fork made, as if the process had died.
	w.hooks.failNthCreate(3)
	w.hooks.setFailRemove(true)
	_, err := r.Fork(ctx, src.ID, 3, nil)
	req.ErrorIs(t, err, errInjected)
	w.hooks.failNthCreate(0)
	w.hooks.setFailRemove(false)
	left := w.child(t, "002")
	req.Contains(t, objectNames(t, left, false), "turn_001.json", "the crash left a copied checkpoint")

	req.Equal(t, []string{src.ID}, listedIDs(t, r), "a half-made fork is never listed")
	_, err = checkpoint.OpenSessionStore[int](r, "002")
	req.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = r.Create(ctx, "002", nil)
	req.ErrorIs(t, err, checkpoint.ErrExists, "Create must not adopt the fork's checkpoints")
	req.Contains(t, err.Error(), "fork")
	s, err := r.New(ctx, nil)
	req.NoError(t, err)
	req.Equal(t, "003", s.ID, "New skips the half-made fork's ID")

	removed, err := w.open(t).RemoveStaging(ctx)
	req.NoError(t, err)
	req.Len(t, removed, 1)
	req.Contains(t, removed[0], "002")
	req.Equal(t, []string{"session.json"}, objectNames(t, left, true), "only the tombstone stays")
	req.Equal(t, []string{src.ID, "003"}, listedIDs(t, r))
	_, err = r.Create(ctx, "002", nil)
	req.ErrorIs(t, err, checkpoint.ErrExists, "an abandoned ID is never reused")
	removed, err = r.RemoveStaging(ctx)
	req.NoError(t, err)
	req.Empty(t, removed, "nothing more to remove")

	f, err := r.Fork(ctx, src.ID, 3, nil)
	req.NoError(t, err)
	req.Equal(t, "004", f.ID)
	req.Equal(t, 3, f.Checkpoints)
}

func testBackendForkAbandonedMidway(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	src := newPlayedSession(t, r, 3)

	// While the fork copies into 002, another worker's RemoveStaging takes
	// it for a crashed fork's leftovers and removes them: the fork must
	// not publish 002 with its checkpoints gone.
	cleaner := w.open(t)
	var once sync.Once
	w.hooks.setBeforeCreate(func(name string) error {
		if name == "turn_002.json" {
			once.Do(func() {
				removed, err := cleaner.RemoveStaging(ctx)
				req.NoError(t, err)
				req.Len(t, removed, 1)
			})
		}
		return nil
	})
	f, err := r.Fork(ctx, src.ID, 3, nil)
	w.hooks.setBeforeCreate(nil)
	req.NoError(t, err, "the fork goes on under the next ID")
	req.NotEqual(t, "002", f.ID)
	req.Equal(t, 3, f.Checkpoints)
	st, err := checkpoint.OpenSessionStore[int](r, f.ID, checkpoint.ReadOnly())
	req.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, _, err := st.Load(ctx, step)
		req.NoError(t, err, "step %d", step)
	}
	req.NoError(t, st.Close())
	req.Equal(t, []string{src.ID, f.ID}, listedIDs(t, r), "002 was never published")
	req.Equal(t, []string{"session.json"}, objectNames(t, w.child(t, "002"), true))
}

func testBackendCreateAfterCrashedCreate(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	// A crash between the claim and session.json.
	w.hooks.failNthCreate(2)
	w.hooks.setFailRemove(true)
	_, err := r.Create(ctx, "run-7", nil)
	req.ErrorIs(t, err, errInjected)
	w.hooks.failNthCreate(0)
	w.hooks.setFailRemove(false)
	req.Empty(t, listedIDs(t, r))
	req.NotEmpty(t, objectNames(t, w.child(t, "run-7"), true), "the claim is left")

	s, err := w.open(t).Create(ctx, "run-7", map[string]string{"try": "2"})
	req.NoError(t, err, "the ID of a crashed Create can be created again")
	req.Equal(t, "2", s.Meta["try"])
	_, err = r.Create(ctx, "run-7", nil)
	req.ErrorIs(t, err, checkpoint.ErrExists)
}

func testBackendCreateDoesNotAdoptForeign(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	// A store written in the child "x" without Sessions.
	root := w.root(t, false)
	t.Cleanup(func() { root.Close() })
	sub, err := root.Sub(ctx, "x", false)
	req.NoError(t, err)
	st, err := checkpoint.OpenBackend[int](sub, checkpoint.WithLayout("turn", 3))
	req.NoError(t, err)
	_, err = st.Save(ctx, 1, 10)
	req.NoError(t, err)
	req.NoError(t, st.Close())

	// A store without session.json is listed as a damaged session: damage
	// hides nothing.
	list, err := r.List(ctx)
	req.NoError(t, err)
	req.Len(t, list, 1)
	req.Equal(t, "x", list[0].ID)
	req.ErrorIs(t, list[0].Err, checkpoint.ErrCorrupt)
	req.Equal(t, 1, list[0].Checkpoints)
	_, err = r.Create(ctx, "x", nil)
	req.ErrorIs(t, err, checkpoint.ErrExists)
	req.Contains(t, err.Error(), "turn_001.json")
	req.Equal(t, []string{"turn_001.json"}, objectNames(t, w.child(t, "x"), false), "nothing was added or removed")
	removed, err := r.RemoveStaging(ctx)
	req.NoError(t, err)
	req.Empty(t, removed, "a store not made by Sessions is never removed")
	req.Equal(t, []string{"turn_001.json"}, objectNames(t, w.child(t, "x"), false))
}

func testBackendSetMetaRetriesOnConflict(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	other := w.open(t)
	s, err := r.New(ctx, map[string]string{"v": "0"})
	req.NoError(t, err)

	// Between SetMeta's read and its replace, another worker writes.
	var replaces []error
	var once sync.Once
	w.hooks.setBeforeReplace(func(name string) error {
		once.Do(func() { req.NoError(t, other.SetMeta(ctx, s.ID, map[string]string{"v": "other"})) })
		return nil
	})
	w.hooks.setAfterReplace(func(err error) { replaces = append(replaces, err) })
	req.NoError(t, r.SetMeta(ctx, s.ID, map[string]string{"v": "mine"}))
	req.Len(t, replaces, 2, "the first replace conflicted, the second went through")
	req.ErrorIs(t, replaces[0], checkpoint.ErrConflict)
	g, err := r.Get(ctx, s.ID)
	req.NoError(t, err)
	req.Equal(t, map[string]string{"v": "mine"}, g.Meta)
	req.Equal(t, s.Created, g.Created)
}

func testBackendSetMetaDoesNotResurrect(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	s, err := r.New(ctx, nil)
	req.NoError(t, err)
	child := w.child(t, s.ID)
	w.hooks.setBeforeReplace(func(name string) error {
		_, err := child.Remove(ctx, "session.json")
		return err
	})
	err = r.SetMeta(ctx, s.ID, map[string]string{"v": "1"})
	req.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = child.Stat(ctx, "session.json")
	req.ErrorIs(t, err, fs.ErrNotExist, "SetMeta brought a removed session back")
}

func testBackendSetMetaEndlessConflicts(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	other := w.open(t)
	s, err := r.New(ctx, nil)
	req.NoError(t, err)
	n := 0
	w.hooks.setBeforeReplace(func(name string) error {
		n++
		return other.SetMeta(ctx, s.ID, map[string]string{"n": fmt.Sprint(n)})
	})
	err = r.SetMeta(ctx, s.ID, map[string]string{"v": "mine"})
	req.ErrorIs(t, err, checkpoint.ErrConflict)
	req.Greater(t, n, 1, "it retried")
	w.hooks.setBeforeReplace(nil)
	g, err := r.Get(ctx, s.ID)
	req.NoError(t, err)
	req.Equal(t, fmt.Sprint(n), g.Meta["n"], "the other writer's last write stands")
}

func testBackendSecondWriterIsLocked(t *testing.T, w workers) {
	ctx := context.Background()
	r1, r2 := w.open(t), w.open(t)
	for _, id := range []string{"a", "b"} {
		_, err := r1.Create(ctx, id, nil)
		req.NoError(t, err)
	}
	st, err := checkpoint.OpenSessionStore[int](r1, "a")
	req.NoError(t, err)
	_, err = checkpoint.OpenSessionStore[int](r2, "a")
	req.ErrorIs(t, err, checkpoint.ErrLocked, "two writers of one session")
	other, err := checkpoint.OpenSessionStore[int](r2, "b")
	req.NoError(t, err, "different sessions run at once")
	_, err = st.Save(ctx, 1, 1)
	req.NoError(t, err)
	_, err = other.Save(ctx, 1, 2)
	req.NoError(t, err)
	req.NoError(t, other.Close())
	req.NoError(t, st.Close())
	again, err := checkpoint.OpenSessionStore[int](r2, "a")
	req.NoError(t, err, "the session is free once its writer closed")
	req.NoError(t, again.Close())
}

func testBackendMissingDamagedInvalid(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	_, err := r.Get(ctx, "nope")
	req.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = checkpoint.OpenSessionStore[int](r, "nope")
	req.ErrorIs(t, err, checkpoint.ErrNotFound)
	req.ErrorIs(t, r.SetMeta(ctx, "nope", nil), checkpoint.ErrNotFound)
	for _, id := range []string{"", "\xff", strings.Repeat("x", 1025)} {
		_, err := r.Create(ctx, id, nil)
		req.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", id)
		_, err = r.Get(ctx, id)
		req.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", id)
		_, err = checkpoint.OpenSessionStore[int](r, id)
		req.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", id)
	}

	_, err = r.Create(ctx, "good", nil)
	req.NoError(t, err)
	_, err = r.Create(ctx, "bad", nil)
	req.NoError(t, err)
	_, err = w.child(t, "bad").Replace(ctx, "session.json", "", func(wr io.Writer) error {
		_, err := io.WriteString(wr, "{not json")
		return err
	})
	req.NoError(t, err)
	list, err := r.List(ctx)
	req.NoError(t, err)
	req.Len(t, list, 2, "a damaged session never hides the others")
	for _, s := range list {
		if s.ID == "bad" {
			req.ErrorIs(t, s.Err, checkpoint.ErrCorrupt)
		} else {
			req.NoError(t, s.Err)
		}
	}
	_, err = r.Get(ctx, "bad")
	req.ErrorIs(t, err, checkpoint.ErrCorrupt)
	_, err = checkpoint.OpenSessionStore[int](r, "bad")
	req.ErrorIs(t, err, checkpoint.ErrCorrupt)
}

func testBackendReadOnlyRoot(t *testing.T, w workers) {
	ctx := context.Background()
	s, err := w.open(t).New(ctx, nil)
	req.NoError(t, err)
	ro := w.open(t, checkpoint.ReadOnly())
	_, err = ro.New(ctx, nil)
	req.ErrorIs(t, err, checkpoint.ErrReadOnly)
	_, err = ro.Create(ctx, "x", nil)
	req.ErrorIs(t, err, checkpoint.ErrReadOnly)
	_, err = ro.Fork(ctx, s.ID, 0, nil)
	req.ErrorIs(t, err, checkpoint.ErrReadOnly)
	req.ErrorIs(t, ro.SetMeta(ctx, s.ID, nil), checkpoint.ErrReadOnly)
	_, err = ro.RemoveStaging(ctx)
	req.ErrorIs(t, err, checkpoint.ErrReadOnly)
	req.Equal(t, []string{s.ID}, listedIDs(t, ro))
	st, err := checkpoint.OpenSessionStore[int](ro, s.ID)
	req.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	req.ErrorIs(t, err, checkpoint.ErrReadOnly)
	req.NoError(t, st.Close())
}

func testBackendCloseClosesWhatItOpened(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.openHooked(t)
	s, err := r.New(ctx, nil)
	req.NoError(t, err)
	playSession(t, r, s.ID, 2)
	_, err = r.Create(ctx, "named", nil)
	req.NoError(t, err)
	_, err = r.Fork(ctx, s.ID, 2, nil)
	req.NoError(t, err)
	_, err = r.Fork(ctx, s.ID, 7, nil)
	req.Error(t, err)
	req.NoError(t, r.SetMeta(ctx, "named", map[string]string{"a": "b"}))
	_, err = r.Get(ctx, "named")
	req.NoError(t, err)
	_, err = r.List(ctx)
	req.NoError(t, err)
	_, err = r.RemoveStaging(ctx)
	req.NoError(t, err)
	st, _, err := checkpoint.ResumeLatestSession[int](ctx, r)
	req.NoError(t, err)
	req.NoError(t, st.Close())
	req.NoError(t, r.Close())
	req.Zero(t, w.hooks.openBackends(), "backends left open")
}

// errInjected is the failure hookBackend injects.
var errInjected = errors.New("injected failure")

// backendHooks is shared by a hookBackend and its children.
type backendHooks struct {
	mu            sync.Mutex
	creates       int // counted since failNthCreate
	failCreate    int // the Create to fail, counting from 1; 0: none
	failRemove    bool
	beforeCreate  func(name string) error
	beforeReplace func(name string) error
	afterReplace  func(err error)
	open          int // backends not closed: the root and its children
}

func (h *backendHooks) failNthCreate(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.creates, h.failCreate = 0, n
}

func (h *backendHooks) setFailRemove(fail bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failRemove = fail
}

func (h *backendHooks) setBeforeCreate(f func(string) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beforeCreate = f
}

func (h *backendHooks) setBeforeReplace(f func(string) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beforeReplace = f
}

func (h *backendHooks) setAfterReplace(f func(error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.afterReplace = f
}

func (h *backendHooks) openBackends() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

// hookBackend passes every call to Backend, through the hooks.
type hookBackend struct {
	checkpoint.Backend
	h      *backendHooks
	closed bool
}

func (b *hookBackend) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	b.h.mu.Lock()
	b.h.creates++
	fail := b.h.failCreate != 0 && b.h.creates == b.h.failCreate
	before := b.h.beforeCreate
	b.h.mu.Unlock()
	if fail {
		return checkpoint.Object{}, fmt.Errorf("create %s: %w", name, errInjected)
	}
	if before != nil {
		if err := before(name); err != nil {
			return checkpoint.Object{}, err
		}
	}
	return b.Backend.Create(ctx, name, write)
}

func (b *hookBackend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (checkpoint.Object, error) {
	b.h.mu.Lock()
	before, after := b.h.beforeReplace, b.h.afterReplace
	b.h.mu.Unlock()
	if before != nil {
		if err := before(name); err != nil {
			return checkpoint.Object{}, err
		}
	}
	o, err := b.Backend.Replace(ctx, name, ifVersion, write)
	if after != nil {
		after(err)
	}
	return o, err
}

func (b *hookBackend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	b.h.mu.Lock()
	fail := b.h.failRemove
	b.h.mu.Unlock()
	if fail {
		return make([]bool, len(names)), fmt.Errorf("remove: %w", errInjected)
	}
	return b.Backend.Remove(ctx, names...)
}

func (b *hookBackend) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	c, err := b.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	b.h.mu.Lock()
	b.h.open++
	b.h.mu.Unlock()
	return &hookBackend{Backend: c, h: b.h}, nil
}

func (b *hookBackend) Close() error {
	b.h.mu.Lock()
	if !b.closed {
		b.closed = true
		b.h.open--
	}
	b.h.mu.Unlock()
	return b.Backend.Close()
}

// req checks as testify's require does, and stops the test at the first
// failure: the few checks this file needs, on the standard library only.
var req checks

type checks struct{}

func (checks) fail(t testing.TB, what string, msgAndArgs []any) {
	t.Helper()
	if len(msgAndArgs) > 0 {
		if format, ok := msgAndArgs[0].(string); ok {
			what += ": " + fmt.Sprintf(format, msgAndArgs[1:]...)
		} else {
			what += ": " + fmt.Sprint(msgAndArgs...)
		}
	}
	t.Fatal(what)
}

func (c checks) NoError(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err != nil {
		c.fail(t, fmt.Sprintf("unexpected error: %v", err), msgAndArgs)
	}
}

func (c checks) Error(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err == nil {
		c.fail(t, "an error was expected", msgAndArgs)
	}
}

func (c checks) ErrorIs(t testing.TB, err, target error, msgAndArgs ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		c.fail(t, fmt.Sprintf("error %v does not wrap %q", err, target), msgAndArgs)
	}
}

func (c checks) Equal(t testing.TB, want, got any, msgAndArgs ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		c.fail(t, fmt.Sprintf("not equal:\nwant: %#v\ngot:  %#v", want, got), msgAndArgs)
	}
}

func (c checks) NotEqual(t testing.TB, a, b any, msgAndArgs ...any) {
	t.Helper()
	if reflect.DeepEqual(a, b) {
		c.fail(t, fmt.Sprintf("both are %#v", a), msgAndArgs)
	}
}

func (c checks) False(t testing.TB, v bool, msgAndArgs ...any) {
	t.Helper()
	if v {
		c.fail(t, "true, want false", msgAndArgs)
	}
}

func (c checks) Greater(t testing.TB, a, b int, msgAndArgs ...any) {
	t.Helper()
	if a <= b {
		c.fail(t, fmt.Sprintf("%d is not greater than %d", a, b), msgAndArgs)
	}
}

func (c checks) Zero(t testing.TB, v any, msgAndArgs ...any) {
	t.Helper()
	if v != nil && !reflect.ValueOf(v).IsZero() {
		c.fail(t, fmt.Sprintf("%#v is not zero", v), msgAndArgs)
	}
}

func (c checks) Len(t testing.TB, v any, n int, msgAndArgs ...any) {
	t.Helper()
	if l := reflect.ValueOf(v).Len(); l != n {
		c.fail(t, fmt.Sprintf("length %d, want %d: %#v", l, n, v), msgAndArgs)
	}
}

func (c checks) Empty(t testing.TB, v any, msgAndArgs ...any) {
	t.Helper()
	if v != nil && reflect.ValueOf(v).Len() != 0 {
		c.fail(t, fmt.Sprintf("%#v is not empty", v), msgAndArgs)
	}
}

func (c checks) NotEmpty(t testing.TB, v any, msgAndArgs ...any) {
	t.Helper()
	if v == nil || reflect.ValueOf(v).Len() == 0 {
		c.fail(t, "empty", msgAndArgs)
	}
}

// Contains checks that the string s holds the substring elem, or the
// slice s the element elem.
func (c checks) Contains(t testing.TB, s, elem any, msgAndArgs ...any) {
	t.Helper()
	if str, ok := s.(string); ok {
		if sub, ok := elem.(string); !ok || !strings.Contains(str, sub) {
			c.fail(t, fmt.Sprintf("%q does not contain %#v", str, elem), msgAndArgs)
		}
		return
	}
	v := reflect.ValueOf(s)
	for i := range v.Len() {
		if reflect.DeepEqual(v.Index(i).Interface(), elem) {
			return
		}
	}
	c.fail(t, fmt.Sprintf("%#v does not contain %#v", s, elem), msgAndArgs)
}
