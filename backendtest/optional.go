package backendtest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/storage"
)

// optionalCases check the optional interfaces of package storage that the
// backend implements; each case passes at once on a backend that does not.
func (s *suite) optionalCases() []testCase {
	return []testCase{
		{"TraitsAreTheSameForChildren", s.testTraitsAreTheSameForChildren},
		{"UnsyncedReplaceIsAtomicAndVisible", s.testUnsyncedReplaceIsAtomicAndVisible},
		{"UnsyncedRemoveRemovesAndReports", s.testUnsyncedRemoveRemovesAndReports},
		{"RemoveTempsNeverRemovesAnObject", s.testRemoveTempsNeverRemovesAnObject},
		{"LockStateNeverHidesAHolderNorInventsOne", s.testLockStateNeverHidesAHolderNorInventsOne},
		{"GroupCreateIsWholeVisibleAndNeverReplaces", s.testGroupCreateIsWholeVisibleAndNeverReplaces},
		{"GroupCreateThatFailsLeavesNothing", s.testGroupCreateThatFailsLeavesNothing},
		{"GroupCommitKeepsWhatItCommits", s.testGroupCommitKeepsWhatItCommits},
	}
}

// groupCommitter returns b as a storage.GroupCommitter, or skips the test.
func groupCommitter(t *testing.T, b checkpoint.Backend) storage.GroupCommitter {
	t.Helper()
	g, ok := b.(storage.GroupCommitter)
	if !ok {
		t.Skip("not a storage.GroupCommitter")
	}
	return g
}

// CreateUncommitted publishes as Create does, but for the durability of
// the name: called concurrently for distinct names (as an Async store
// calls it for a batch), each object is whole under its name at once for
// another handle (Open, Stat, List), described by the Object returned;
// a name that exists is ErrExists and keeps its bytes and Version, even
// while the same call goes on for other names.
func (s *suite) testGroupCreateIsWholeVisibleAndNeverReplaces(t *testing.T) {
	bs := s.handles(t, 2)
	g := groupCommitter(t, bs[0])
	ctx := t.Context()
	before := listNames(t, bs[1])
	old := create(t, bs[0], "taken.json", payload(100, 300))
	names := []string{"g-0.json", "g-1.json", "g-2.json", "g-3.json", "g-4.json", "taken.json"}
	objs := make([]checkpoint.Object, len(names))
	errs := parallel(len(names), func(i int) (err error) {
		objs[i], err = g.CreateUncommitted(ctx, names[i], writeBytes(payload(uint64(i), 5000+i)))
		return err
	})
	for i, name := range names[:len(names)-1] {
		if errs[i] != nil {
			t.Fatalf("CreateUncommitted %q: %v", name, errs[i])
		}
		checkWritten(t, "CreateUncommitted", objs[i], name, payload(uint64(i), 5000+i))
		got := requireBytes(t, bs[1], name, payload(uint64(i), 5000+i))
		if st := stat(t, bs[1], name); got.Version != objs[i].Version || st.Version != objs[i].Version {
			t.Errorf("%q: CreateUncommitted returned Version %q, another handle's Open %q and Stat %q", name, objs[i].Version, got.Version, st.Version)
		}
	}
	requireErr(t, "CreateUncommitted of a name that exists", errs[len(names)-1], checkpoint.ErrExists)
	if got := requireBytes(t, bs[1], "taken.json", payload(100, 300)); got.Version != old.Version {
		t.Fatalf("a refused CreateUncommitted changed the Version of %q from %q to %q", "taken.json", old.Version, got.Version)
	}
	requireAdded(t, bs[1], before, slices.Clone(names)...)
	if err := g.Commit(ctx, names[:len(names)-1]...); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// A CreateUncommitted that fails (its write fails, its context is
// cancelled, its name is not a plain one) leaves nothing, as Create's
// failure does: no object under its name and no other name in a listing.
func (s *suite) testGroupCreateThatFailsLeavesNothing(t *testing.T) {
	bs := s.handles(t, 2)
	g := groupCommitter(t, bs[0])
	before := listNames(t, bs[1])
	_, err := g.CreateUncommitted(t.Context(), "failed.json", failAfter(payload(1, 20<<10)))
	requireErr(t, "a CreateUncommitted whose write fails", err, errWrite)
	requireMissing(t, bs[1], "failed.json")
	_, err = g.CreateUncommitted(cancelled(t), "cancelled.json", writeBytes(payload(2, 100)))
	requireErr(t, "a CreateUncommitted with a cancelled context", err, context.Canceled)
	requireMissing(t, bs[1], "cancelled.json")
	for _, name := range []string{"", "..", "child/x.json", "../x.json"} {
		if _, err := g.CreateUncommitted(t.Context(), name, writeBytes(payload(3, 10))); err == nil {
			t.Fatalf("CreateUncommitted accepted the name %q", name)
		}
	}
	requireAdded(t, bs[1], before)
}

// Commit of names CreateUncommitted published keeps each of them as it is
// (Commit with no name too), in the store and in a child store, and a
// Commit of a name that is not a plain one is an error.
func (s *suite) testGroupCommitKeepsWhatItCommits(t *testing.T) {
	bs := s.handles(t, 2)
	ctx := t.Context()
	for _, where := range []string{"store", "child"} {
		b, other := bs[0], bs[1]
		if where == "child" {
			b, other = sub(t, bs[0], "child", false), sub(t, bs[1], "child", false)
		}
		g := groupCommitter(t, b)
		before := listNames(t, other)
		if err := g.Commit(ctx); err != nil {
			t.Fatalf("%s: Commit of no name: %v", where, err)
		}
		var names []string
		vs := map[string]string{}
		for i := range 3 {
			name := fmt.Sprintf("c-%d.json", i)
			o, err := g.CreateUncommitted(ctx, name, writeBytes(payload(uint64(10+i), 1000)))
			if err != nil {
				t.Fatalf("%s: CreateUncommitted %q: %v", where, name, err)
			}
			names = append(names, name)
			vs[name] = o.Version
		}
		if err := g.Commit(ctx, names...); err != nil {
			t.Fatalf("%s: Commit %v: %v", where, names, err)
		}
		for i, name := range names {
			if got := requireBytes(t, other, name, payload(uint64(10+i), 1000)); got.Version != vs[name] {
				t.Fatalf("%s: Commit changed the Version of %q from %q to %q", where, name, vs[name], got.Version)
			}
		}
		requireAdded(t, other, before, slices.Clone(names)...)
		if err := g.Commit(ctx, "../x.json"); err == nil {
			t.Fatalf("%s: Commit accepted a name with a path", where)
		}
	}
}

// A backend's Traits are the same for every handle and every child store:
// a session's store is stored as its root is.
func (s *suite) testTraitsAreTheSameForChildren(t *testing.T) {
	bs := s.handles(t, 2)
	want := storage.TraitsOf(bs[0])
	if got := storage.TraitsOf(bs[1]); got != want {
		t.Fatalf("two handles on one store have Traits %+v and %+v", want, got)
	}
	for _, create := range []bool{false, true} {
		c := sub(t, bs[0], "child", create)
		if got := storage.TraitsOf(c); got != want {
			t.Fatalf("a child store (create %v) has Traits %+v, its parent %+v", create, got, want)
		}
	}
}

// ReplaceUnsynced replaces as Replace does, but for durability: another
// handle sees the new bytes at once, under a new Version, and a failed
// write leaves the old bytes.
func (s *suite) testUnsyncedReplaceIsAtomicAndVisible(t *testing.T) {
	bs := s.handles(t, 2)
	u, ok := bs[0].(storage.Unsynced)
	if !ok {
		t.Skip("not a storage.Unsynced")
	}
	ctx := t.Context()
	old := create(t, bs[0], "index.json", payload(1, 5000))
	_, err := u.ReplaceUnsynced(ctx, "index.json", failAfter(payload(2, 5000)))
	requireErr(t, "a ReplaceUnsynced whose write fails", err, errWrite)
	requireBytes(t, bs[1], "index.json", payload(1, 5000))

	obj, err := u.ReplaceUnsynced(ctx, "index.json", writeBytes(payload(3, 7000)))
	if err != nil {
		t.Fatalf("ReplaceUnsynced: %v", err)
	}
	checkWritten(t, "ReplaceUnsynced", obj, "index.json", payload(3, 7000))
	if obj.Version == old.Version {
		t.Fatalf("ReplaceUnsynced kept the Version %q", old.Version)
	}
	got := requireBytes(t, bs[1], "index.json", payload(3, 7000))
	if got.Version != obj.Version {
		t.Fatalf("another handle sees Version %q, ReplaceUnsynced returned %q", got.Version, obj.Version)
	}
	// A name that is not there is created.
	if _, err := u.ReplaceUnsynced(ctx, "new.json", writeBytes(payload(4, 10))); err != nil {
		t.Fatalf("ReplaceUnsynced of a missing name: %v", err)
	}
	requireBytes(t, bs[1], "new.json", payload(4, 10))
	if _, err := u.ReplaceUnsynced(ctx, "../escape.json", writeBytes(payload(5, 10))); err == nil {
		t.Fatal("ReplaceUnsynced accepted a name with a path")
	}
}

// RemoveUnsynced removes as Remove does: what it says is gone is gone for
// another handle, a missing name is gone, and an invalid name is an error
// that does not stop the others.
func (s *suite) testUnsyncedRemoveRemovesAndReports(t *testing.T) {
	bs := s.handles(t, 2)
	u, ok := bs[0].(storage.Unsynced)
	if !ok {
		t.Skip("not a storage.Unsynced")
	}
	create(t, bs[0], "a.json", payload(1, 10))
	create(t, bs[0], "b.json", payload(2, 10))
	gone, err := u.RemoveUnsynced(t.Context(), "a.json", "../x", "missing.json", "b.json")
	if err == nil {
		t.Fatal("RemoveUnsynced of an invalid name returned no error")
	}
	if want := []bool{true, false, true, true}; !slices.Equal(gone, want) {
		t.Fatalf("RemoveUnsynced says gone %v, want %v", gone, want)
	}
	requireMissing(t, bs[1], "a.json")
	requireMissing(t, bs[1], "b.json")
}

// RemoveTemps tells the backend's temporary objects from the objects it
// holds: whatever its caller accepts (every final name, legacy names
// excepted, which a user's object may share), it removes no object that a
// Create or a Replace published, and a write that returned, failed or
// not, leaves no temporary object to remove.
func (s *suite) testRemoveTempsNeverRemovesAnObject(t *testing.T) {
	b := s.one(t)
	tc, ok := b.(storage.TempCleaner)
	if !ok {
		t.Skip("not a storage.TempCleaner")
	}
	ctx := t.Context()
	before := listNames(t, b)
	names := []string{"step_001.json", "notes.json", ".notes.json", "a.tmp", ".a.tmp", "x.ckpt-tmp-1", "tmp-1"}
	for i, n := range names {
		create(t, b, n, payload(uint64(i), 10))
	}
	replace(t, b, "notes.json", "", payload(9, 20))
	_, err := b.Create(ctx, "failed.json", failAfter(payload(10, 5000)))
	requireErr(t, "a Create whose write fails", err, errWrite)
	_, err = b.Replace(ctx, "notes.json", "", failAfter(payload(11, 5000)))
	requireErr(t, "a Replace whose write fails", err, errWrite)

	var asked []string
	removed, err := tc.RemoveTemps(ctx, func(final string, legacy bool) bool {
		asked = append(asked, final)
		return !legacy
	})
	if err != nil {
		t.Fatalf("RemoveTemps: %v", err)
	}
	if len(removed) > 0 {
		t.Fatalf("RemoveTemps removed %v (asked about %v); every write had returned", removed, asked)
	}
	requireAdded(t, b, before, slices.Clone(names)...)
	for i, n := range names {
		want := payload(uint64(i), 10)
		if n == "notes.json" {
			want = payload(9, 20)
		}
		requireBytes(t, b, n, want)
	}
	if _, err := tc.RemoveTemps(cancelled(t), func(string, bool) bool { return true }); err == nil {
		t.Fatal("RemoveTemps with a cancelled context returned no error")
	}
}

// LockState never says LockNotSeen while a handle of this process holds
// the lock, nor LockHeld once it is released, and looking takes nothing:
// Lock works after it.
func (s *suite) testLockStateNeverHidesAHolderNorInventsOne(t *testing.T) {
	bs := s.handles(t, 2)
	p, ok := bs[0].(storage.LockProber)
	if !ok {
		t.Skip("not a storage.LockProber")
	}
	ctx := t.Context()
	if st, _ := p.LockState(ctx); st == storage.LockHeld {
		t.Fatal("LockState says LockHeld of a lock nobody took")
	}
	unlock, err := bs[1].Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if st, _ := p.LockState(ctx); st == storage.LockNotSeen {
		t.Fatal("LockState says LockNotSeen of a lock another handle holds")
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if st, _ := p.LockState(ctx); st == storage.LockHeld {
		t.Fatal("LockState says LockHeld of a released lock")
	}
	unlock, err = bs[0].Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after LockState: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
}
