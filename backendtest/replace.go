package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/gocheckpoint/checkpoint/storage"
	"io"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

func (s *suite) replaceCases() []testCase {
	return []testCase{
		{"ReplaceIfVersionMatches", s.testReplaceIfVersionMatches},
		{"ReplaceConflictChangesNothing", s.testReplaceConflictChangesNothing},
		{"ReplaceNoObject", s.testReplaceNoObject},
		{"ReplaceUnconditional", s.testReplaceUnconditional},
		{"FailedReplaceKeepsOld", s.testFailedReplaceKeepsOld},
		{"ReplaceIsAtomicToReaders", s.testReplaceIsAtomicToReaders},
		{"VersionChangesOnEveryWrite", s.testVersionChangesOnEveryWrite},
		{"VersionChangesOnRewriteBehindTheBackend", s.testVersionChangesOnRewriteBehindTheBackend},
	}
}

// Replace with the Version a writer last saw (returned by Create or
// Replace, or by Stat on another handle) replaces the object, and the
// Version it returns is the object's new Version.
func (s *suite) testReplaceIfVersionMatches(t *testing.T) {
	bs := s.handles(t, 2)
	const name = "rolling.json"
	p := payload(0, 2000)
	obj := create(t, bs[0], name, p)
	for i := 1; i <= 3; i++ {
		prev := obj
		p = payload(uint64(i), 2000)
		obj = replace(t, bs[0], name, prev.Version, p)
		if obj.Version == prev.Version {
			t.Fatalf("Replace %q returned the Version it replaced, %q", name, obj.Version)
		}
		got := requireBytes(t, bs[1], name, p)
		if got.Version != obj.Version {
			t.Fatalf("Replace %q returned Version %q, Open on another handle says %q", name, obj.Version, got.Version)
		}
	}
	// Another process replaces with the Version it read.
	seen := stat(t, bs[1], name)
	p = payload(10, 2000)
	obj = replace(t, bs[1], name, seen.Version, p)
	requireBytes(t, bs[0], name, p)
	replace(t, bs[0], name, obj.Version, payload(11, 10))
}

// A Replace whose ifVersion is not the object's (any Version the name
// had before, the Version of an object since removed, NoObject on an
// existing object, a Version on a missing name) fails with ErrConflict and
// changes nothing.
func (s *suite) testReplaceConflictChangesNothing(t *testing.T) {
	b := s.one(t)
	const name = "side.json"
	cur := create(t, b, name, payload(0, 3000))
	var stale []string
	// Several replacements, so that a backend whose Version is a reusable
	// identity (an inode number freed by the last replacement) shows it.
	for i := 1; i <= 6; i++ {
		stale = append(stale, cur.Version)
		cur = replace(t, b, name, cur.Version, payload(uint64(i), 3000))
	}
	want := payload(6, 3000)
	const gone = "gone.json"
	goneObj := create(t, b, gone, payload(10, 3000))
	if _, err := b.Remove(t.Context(), gone); err != nil {
		t.Fatalf("Remove %q: %v", gone, err)
	}
	before := listNames(t, b)

	type attempt struct{ what, name, ifVersion string }
	attempts := []attempt{
		{"NoObject", name, storage.NoObject},
		{"the Version of another name's object", name, goneObj.Version},
		{"the Version of a removed object", gone, goneObj.Version},
		{"a Version it never had", gone, cur.Version},
	}
	for i, v := range stale {
		attempts = append(attempts, attempt{fmt.Sprintf("the Version of its write %d of 7", i+1), name, v})
	}
	for _, c := range attempts {
		what := fmt.Sprintf("Replace %q if its Version is %s", c.name, c.what)
		_, err := b.Replace(t.Context(), c.name, c.ifVersion, writeBytes(payload(20, 3000)))
		requireErr(t, what, err, checkpoint.ErrConflict)
		if c.name == gone {
			requireMissing(t, b, gone)
		} else if got := requireBytes(t, b, name, want); got.Version != cur.Version {
			t.Fatalf("%s failed but changed its Version from %q to %q", what, cur.Version, got.Version)
		}
		requireAdded(t, b, before)
	}
}

// Replace with NoObject creates an object where there is none, and fails
// with ErrConflict where there is one.
func (s *suite) testReplaceNoObject(t *testing.T) {
	bs := s.handles(t, 2)
	const name = "lease.json"
	p := payload(1, 100)
	replace(t, bs[0], name, storage.NoObject, p)
	requireBytes(t, bs[1], name, p)
	_, err := bs[1].Replace(t.Context(), name, storage.NoObject, writeBytes(payload(2, 100)))
	requireErr(t, "Replace with NoObject of an existing object", err, checkpoint.ErrConflict)
	requireBytes(t, bs[0], name, p)
}

// Replace with ifVersion "" writes whatever is there: nothing, or an
// object.
func (s *suite) testReplaceUnconditional(t *testing.T) {
	b := s.one(t)
	const name = "any.json"
	first := replace(t, b, name, "", payload(1, 100))
	requireBytes(t, b, name, payload(1, 100))
	second := replace(t, b, name, "", payload(2, 200))
	requireBytes(t, b, name, payload(2, 200))
	if second.Version == first.Version {
		t.Errorf("Replace %q returned the Version it replaced, %q", name, first.Version)
	}
}

// A Replace whose write function fails returns that failure and leaves the
// old object (bytes and Version), or no object, as it was: nothing else
// appears in List. A Replace whose context has ended either fails and
// changes nothing, or succeeds whole.
func (s *suite) testFailedReplaceKeepsOld(t *testing.T) {
	b := s.one(t)
	const name = "keep.json"
	old := payload(1, 1<<20)
	obj := create(t, b, name, old)
	before := listNames(t, b)
	for _, ifVersion := range []string{obj.Version, ""} {
		_, err := b.Replace(t.Context(), name, ifVersion, failAfter(payload(2, 1<<20)))
		if !errors.Is(err, errWrite) {
			t.Fatalf("Replace %q (ifVersion %q) whose write failed: %v; want an error wrapping the write's error", name, ifVersion, err)
		}
		if got := requireBytes(t, b, name, old); got.Version != obj.Version {
			t.Fatalf("a failed Replace of %q changed its Version from %q to %q", name, obj.Version, got.Version)
		}
		requireAdded(t, b, before)
	}

	const missing = "never.json"
	_, err := b.Replace(t.Context(), missing, storage.NoObject, failAfter(payload(3, 100)))
	if !errors.Is(err, errWrite) {
		t.Fatalf("Replace %q whose write failed: %v; want an error wrapping the write's error", missing, err)
	}
	requireMissing(t, b, missing)
	requireAdded(t, b, before)

	// The contract promises a cancelled Create fails; of Replace it
	// promises only that a failure leaves no partial object.
	p := payload(4, 1000)
	_, err = b.Replace(cancelled(t), name, obj.Version, writeBytes(p))
	if err != nil {
		if got := requireBytes(t, b, name, old); got.Version != obj.Version {
			t.Fatalf("a Replace of %q with a cancelled context failed (%v) but changed its Version", name, err)
		}
	} else {
		requireBytes(t, b, name, p)
	}
	requireAdded(t, b, before)
}

// Readers on another handle, opening and reading an object while it is
// replaced over and over, each read the old bytes or the new, never a mix.
func (s *suite) testReplaceIsAtomicToReaders(t *testing.T) {
	if s.cfg.replaceWaits {
		t.Skip("ReplaceWaitsForReaders: a Replace waits for the readers")
	}
	bs := s.handles(t, 2)
	const name = "swapped.json"
	const size = 256 << 10
	versions := [][]byte{payload(1, size), payload(2, size), payload(3, size)}
	obj := create(t, bs[0], name, versions[0])

	var done, readerFailed atomic.Bool
	var readsDone atomic.Int64
	errs := parallel(3, func(i int) error {
		if i == 0 {
			defer done.Store(true)
			// At least 24 replaces, and on until the readers have read 48
			// times while they go on (or one failed): where goroutines are
			// scheduled coarsely (Wine), 24 replaces can end before a
			// reader starts, and a torn replace would go unseen.
			for n := 1; n <= 24 || readsDone.Load() < 48 && !readerFailed.Load() && n <= 1<<12; n++ {
				if n%8 == 0 {
					runtime.Gosched()
				}
				var err error
				obj, err = bs[0].Replace(t.Context(), name, obj.Version, writeBytes(versions[n%3]))
				if err != nil {
					return fmt.Errorf("replace %q: %w", name, err)
				}
			}
			return nil
		}
		fail := func(err error) error {
			readerFailed.Store(true)
			return err
		}
		for reads := 0; !done.Load() || reads == 0; reads++ {
			rc, o, err := bs[1].Open(t.Context(), name)
			if err != nil {
				return fail(fmt.Errorf("open %q while it is replaced: %w", name, err))
			}
			p, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return fail(fmt.Errorf("read %q while it is replaced: %w", name, err))
			}
			if o.Size != int64(len(p)) {
				return fail(fmt.Errorf("open %q returned Size %d and %d bytes", name, o.Size, len(p)))
			}
			if !bytes.Equal(p, versions[0]) && !bytes.Equal(p, versions[1]) && !bytes.Equal(p, versions[2]) {
				return fail(fmt.Errorf("a reader of %q read %s, which is none of the objects written there: a torn object", name, describe(p)))
			}
			readsDone.Add(1)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// Every object written under a name has a Version of its own: each
// Replace (with bytes of the same size, so a Version made of size and
// time alone cannot pass), and a Create after a Remove.
func (s *suite) testVersionChangesOnEveryWrite(t *testing.T) {
	b := s.one(t)
	const name = "versions.json"
	seen := map[string]int{}
	note := func(i int, v string) {
		t.Helper()
		if j, ok := seen[v]; ok {
			t.Fatalf("write %d of %q has the Version %q of write %d: each object under a name has a Version of its own", i, name, v, j)
		}
		seen[v] = i
		if st := stat(t, b, name); st.Version != v {
			t.Fatalf("write %d of %q returned Version %q; Stat says %q", i, name, v, st.Version)
		}
	}
	obj := create(t, b, name, payload(0, 500))
	note(0, obj.Version)
	for i := 1; i <= 4; i++ {
		obj = replace(t, b, name, obj.Version, payload(uint64(i), 500))
		note(i, obj.Version)
	}
	for i := 5; i <= 6; i++ {
		obj = replace(t, b, name, "", payload(uint64(i), 500))
		note(i, obj.Version)
	}
	for i := 7; i <= 8; i++ {
		if _, err := b.Remove(t.Context(), name); err != nil {
			t.Fatalf("Remove %q: %v", name, err)
		}
		note(i, create(t, b, name, payload(uint64(i), 500)).Version)
	}
}

// An object rewritten behind the backend (see RewriteInPlace), with its
// size kept and what else can be restored restored, has a new Version: a
// conditional Replace on the Version it had fails with ErrConflict and
// leaves the rewrite's bytes.
func (s *suite) testVersionChangesOnRewriteBehindTheBackend(t *testing.T) {
	if s.cfg.rewrite == nil {
		t.Skip("no RewriteInPlace: the suite cannot write behind the backend")
	}
	bs := s.handles(t, 2)
	const name = "rolling.json"
	obj := create(t, bs[0], name, payload(1, 500))
	rewritten := payload(2, 500)
	s.cfg.rewrite(t, bs[0], name, rewritten)
	for _, b := range bs {
		if st := stat(t, b, name); st.Version == obj.Version {
			t.Fatalf("%q rewritten behind the backend kept its Version %q", name, obj.Version)
		}
	}
	_, err := bs[0].Replace(t.Context(), name, obj.Version, writeBytes(payload(3, 500)))
	requireErr(t, fmt.Sprintf("Replace %q on the Version it had before a rewrite behind the backend", name), err, checkpoint.ErrConflict)
	requireBytes(t, bs[1], name, rewritten)
}
