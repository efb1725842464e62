// Package backendtest is the conformance suite of storage.Backend (which
// package checkpoint names checkpoint.Backend): a backend that passes Run
// keeps every promise of the contract written on storage.Backend, and a
// checkpoint.Store can be opened on it with checkpoint.OpenBackend.
//
// A backend's author calls Run from a test, with a function that makes a
// fresh, empty store for each subtest and returns how to open a handle on
// it. Run opens one handle for most subtests, and a second one on the same
// store where a subtest needs another process (create races across
// handles, visibility to another handle, the lock):
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) backendtest.Opener {
//			dir := t.TempDir()
//			return func() (checkpoint.Backend, error) { return dirstore.Open(dir, dirstore.NoSync()) }
//		})
//	}
//
// For object storage, the function gives each subtest a prefix of its own
// (in one bucket), and returns an Opener that builds a new backend on that
// bucket and prefix; pass LeaseTTL if the backend's lock is a lease.
//
// Run runs its subtests in parallel, and closes every handle it opens when
// the subtest ends. The subtests are named after the promise they check
// (CreateRaceHasOneWinner, ReplaceConflictChangesNothing, ...), so
// -run 'TestConformance/ListPastOnePage' runs one of them.
//
// Where the contract leaves room, the suite reads it so:
//   - A name outside [A-Za-z0-9._-] that would leave the flat namespace
//     ("", ".", "..", a path such as "child/x" or "../x") is refused by
//     every method that takes a name, so nothing reaches a child store or
//     beyond the store through one.
//   - Version differs for every different content a name has held; two
//     writes of identical bytes may share one (an S3 ETag does), so the
//     suite always writes different bytes where it expects a new Version.
//   - Sub(create=true) makes a child that Children lists at once, on object
//     storage too.
//   - A sentinel error (ErrExists, ErrConflict, ErrLocked, fs.ErrNotExist)
//     need not name the object: the store names it in its own errors.
//   - Of a cancelled context the contract promises only that Create fails
//     (with the context's error) and leaves nothing; of Replace, that it
//     fails whole or succeeds whole. Other methods are not checked against
//     a cancelled context.
//   - Lock excludes a second Lock on the holder's own handle as well as on
//     another handle, and each child store has a lock of its own.
//
// Where the backend implements an optional interface of package storage
// (storage.Unsynced, storage.GroupCommitter, storage.TempCleaner,
// storage.LockProber), Run checks
// what its doc promises but durability; and that a backend's Traits
// (storage.TraitsOf) are the same for every handle and child store.
//
// Run also opens a checkpoint.Store on the backend for the promises the
// store keeps alike on every backend as long as the backend tells it the
// truth: a damaged object put at a step's name by another handle after
// the store opened is moved aside by a Save of that step, and an intact
// one is never (SaveMovesDamageAtItsNameAside).
//
// What the suite does not check, because it cannot without the backend's
// help: that a change made behind the backend changes the Version (unless
// given RewriteInPlace), durability after a crash or power loss (the
// contract's "crash at any instant" and NoSync), that a writer which lost its
// lease cannot publish (that needs a paused process: see s3store's fencing
// test), that a failed removal does not stop the others, ReadOnly backends,
// and the error text's "who holds the lock".
//
// # The crash model
//
// Mem is a backend in memory that passes Run and RunSessions, and knows what
// a power cut would leave of it, as pebble's vfs.MemFS does: a kill -9 leaves
// every change that reached the storage, and so cannot reveal a missing or
// misplaced sync; a power cut leaves only what was made durable. Each object
// name (and each child store) has the object calls see and the one that
// survives a power cut. A call makes its change durable when the contract on
// storage.Backend says it is, and not before; where the contract does not
// say, the model reads it as strictly as the local directory (package
// dirstore) allows: a crash of Mem loses at least what a crash of the
// directory could:
//
//   - Create and Replace: "When either returns nil the object is durable
//     (unless ... NoSync)" makes that one object durable, and nothing else
//     of another call: a change a call failed to make durable (a mutant's,
//     the one the power is cut in) stays so. Only a local Mem's calls sync
//     a directory, for the changes that the Unsynced contract leaves to
//     such a sync (see the last point).
//   - Remove: "Removals are made durable together, once (one directory
//     sync)" makes every removal it reports gone durable when it returns,
//     whatever it returns for other names; before it returns, a directory
//     may have persisted any of them, so a power cut during a Remove keeps
//     any subset of its removals.
//   - Rename: the contract does not say when it is durable; the directory
//     syncs itself after the move, so Rename's move is durable when it
//     returns nil. A power cut during it leaves the old name, the new one,
//     or both (the directory's link-then-unlink fallback; object storage's
//     copy-then-delete, which the contract lets a store repeat), never
//     neither.
//   - Sub with create: "the child exists at once" is read as durably, as
//     the directory syncs its parent after the mkdir; a child store made by
//     its first write is durable with that write.
//   - Lock holds nothing durable: a power cut ends every process and
//     releases every lock, as it does a directory's flock.
//   - NoSync (MemNoSync) makes nothing durable. A power cut keeps objects
//     whole even then, though a directory opened with NoSync may leave a
//     file published before its bytes reached the disk, empty or torn:
//     a store opened that way promises nothing after a power cut.
//   - A call refused (ErrExists, ErrConflict) or failed changes nothing.
//   - A local Mem (MemLocal) models the directory's optional operations:
//     storage.Unsynced promises no durability ("the next sync of the
//     directory, or none, makes them durable"), so a ReplaceUnsynced or
//     RemoveUnsynced makes nothing durable when it returns; a later call
//     that syncs the same directory (any durable Create, Replace, Remove
//     or Rename of the same store, or a Sub with create in it) makes it
//     durable, as the directory's fsync persists every earlier change of
//     its entries. Until then a power cut keeps it or not, whole: the
//     Unsynced contract promises the old object or the new one, never a
//     torn one (CrashCloneConfig.TearUnsynced tears it as the directory
//     may). A local Mem's write that the power is cut in may also leave
//     its temporary object, as a directory's temporary file. Object
//     storage (a Mem without MemLocal) has no directory: each change is
//     durable on its own, or never.
//
// A power-cut test runs a scenario once to count its mutating calls
// (Mem.Ops), then once for each with Mem.CutPowerAt: what that call
// changes is seen but not durable, it and every later call fail with
// ErrPowerCut, and Mem.CrashClone gives what the cut leaves (exactly what
// was durable, everything, or a seeded mix). This package's own tests do
// so for a checkpoint.Store on Mem, of both kinds: saves, retention,
// rolling writes, side files, truncation, error checkpoints and sessions,
// checking after every cut that each call that returned nil kept its
// promise, that no state is wrong or torn and no session appears partly,
// and that the store and the sessions reopen.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// An Opener opens one more handle on one store, as another process
// opening the same directory, or the same bucket and prefix, would. Every
// handle an Opener returns sees the same objects, child stores and lock.
type Opener func() (checkpoint.Backend, error)

// An Option changes what Run expects of a backend.
type Option interface {
	apply(*config)
}

type config struct {
	leaseTTL     time.Duration
	replaceWaits bool
	rewrite      func(t *testing.T, b checkpoint.Backend, name string, p []byte)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// LeaseTTL says the backend's Lock is a lease that expires ttl after its
// holder last renewed it: Run then checks that a lock whose holder was
// closed without unlocking (as a process that died would leave it) can be
// taken by another handle within 5×ttl + 1 s. Give the backend a short ttl
// (a second or less) so the subtest is quick. Without LeaseTTL, Run does
// not check what happens to a lock whose holder never unlocks it.
func LeaseTTL(ttl time.Duration) Option {
	return optionFunc(func(c *config) { c.leaseTTL = ttl })
}

// ReplaceWaitsForReaders says a Replace of an object that a reader holds
// open may wait for the reader to close it, and fail if it does not in
// time: a local directory on a Windows volume without the POSIX rename of
// NTFS (FAT, exFAT, or under Wine), where a file that is open cannot be
// renamed over. Run then skips the subtests that replace an object under
// an open stream.
func ReplaceWaitsForReaders() Option {
	return optionFunc(func(c *config) { c.replaceWaits = true })
}

// RewriteInPlace gives Run a way to change an object behind the backend's
// back, as another program with access to the storage would: rewrite
// writes p as the object name of b's store in place, keeping all it can of
// what the backend may make its Version of (for a local directory: the
// same file, p of the same size as before, the modification time restored,
// as cp -p or a restore from backup leaves it). Run then checks that the
// object's Version changes, so that a conditional Replace on the Version it
// had fails with ErrConflict and changes nothing. Without RewriteInPlace,
// Run has no way to write behind a backend and does not check this.
func RewriteInPlace(rewrite func(t *testing.T, b checkpoint.Backend, name string, p []byte)) Option {
	return optionFunc(func(c *config) { c.rewrite = rewrite })
}

// Run checks that the backends newStore makes keep the contract of
// storage.Backend. newStore is called once per subtest, with that
// subtest's t, and makes a fresh store: one that holds no objects and no
// child stores (a backend may keep objects of its own there, such as a
// lock file, which Run ignores if they are there from the start). The
// Opener it returns opens handles on that store; Run closes each handle
// when the subtest ends, and fails the subtest if Close fails.
func Run(t *testing.T, newStore func(t *testing.T) Opener, opts ...Option) {
	s := &suite{newStore: newStore}
	for _, o := range opts {
		o.apply(&s.cfg)
	}
	for _, c := range s.cases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

type suite struct {
	cfg      config
	newStore func(t *testing.T) Opener
}

type testCase struct {
	name string
	run  func(t *testing.T)
}

func (s *suite) cases() []testCase {
	var cs []testCase
	cs = append(cs, s.createCases()...)
	cs = append(cs, s.replaceCases()...)
	cs = append(cs, s.readCases()...)
	cs = append(cs, s.listCases()...)
	cs = append(cs, s.subCases()...)
	cs = append(cs, s.lockCases()...)
	cs = append(cs, s.storeCases()...)
	cs = append(cs, s.optionalCases()...)
	return cs
}

// handles makes a fresh store and opens n handles on it.
func (s *suite) handles(t *testing.T, n int) []checkpoint.Backend {
	t.Helper()
	open := s.newStore(t)
	if open == nil {
		t.Fatal("backendtest: newStore returned a nil Opener")
	}
	bs := make([]checkpoint.Backend, n)
	for i := range bs {
		bs[i] = openHandle(t, open)
	}
	return bs
}

// one makes a fresh store and opens one handle on it.
func (s *suite) one(t *testing.T) checkpoint.Backend {
	t.Helper()
	return s.handles(t, 1)[0]
}

func openHandle(t *testing.T, open Opener) checkpoint.Backend {
	t.Helper()
	b, err := open()
	if err != nil {
		t.Fatalf("open a handle on the store: %v", err)
	}
	if b == nil {
		t.Fatal("open a handle on the store: the Opener returned a nil Backend and no error")
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close %s: %v", b.Locate(""), err)
		}
	})
	return b
}

// errWrite is what the write functions of failing writes return.
var errWrite = errors.New("backendtest: write failed on purpose")

// payload returns n bytes that differ for every seed.
func payload(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), 'b', 't'})
	p := make([]byte, n)
	_, _ = r.Read(p)
	return p
}

// writeBytes returns a write function that writes p in pieces of a few
// KiB, as an encoder does, so that a backend sees many Writes.
func writeBytes(p []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		for rest := p; len(rest) > 0; {
			n := min(len(rest), 3000)
			if _, err := w.Write(rest[:n]); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	}
}

// failAfter returns a write function that writes p and then fails.
func failAfter(p []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		if err := writeBytes(p)(w); err != nil {
			return err
		}
		return errWrite
	}
}

func create(t *testing.T, b checkpoint.Backend, name string, p []byte) checkpoint.Object {
	t.Helper()
	obj, err := b.Create(t.Context(), name, writeBytes(p))
	if err != nil {
		t.Fatalf("Create %q: %v", name, err)
	}
	checkWritten(t, "Create", obj, name, p)
	return obj
}

func replace(t *testing.T, b checkpoint.Backend, name, ifVersion string, p []byte) checkpoint.Object {
	t.Helper()
	obj, err := b.Replace(t.Context(), name, ifVersion, writeBytes(p))
	if err != nil {
		t.Fatalf("Replace %q (ifVersion %q): %v", name, ifVersion, err)
	}
	checkWritten(t, "Replace", obj, name, p)
	return obj
}

// checkWritten checks the Object that a successful Create or Replace
// returned: it is not a listing, so its Name, Size and Version are told.
func checkWritten(t *testing.T, op string, obj checkpoint.Object, name string, p []byte) {
	t.Helper()
	if obj.Name != name {
		t.Errorf("%s %q returned an Object named %q", op, name, obj.Name)
	}
	if obj.Size != int64(len(p)) {
		t.Errorf("%s %q of %d bytes returned Size %d", op, name, len(p), obj.Size)
	}
	if obj.Version == "" {
		t.Errorf("%s %q returned an empty Version: only List may leave it unsaid", op, name)
	}
}

// stat returns the Object of name, failing the test if Stat fails.
func stat(t *testing.T, b checkpoint.Backend, name string) checkpoint.Object {
	t.Helper()
	obj, err := b.Stat(t.Context(), name)
	if err != nil {
		t.Fatalf("Stat %q: %v", name, err)
	}
	return obj
}

// read opens name, reads it whole and checks that the Object Open returned
// describes what was read.
func read(t *testing.T, b checkpoint.Backend, name string) ([]byte, checkpoint.Object) {
	t.Helper()
	rc, obj, err := b.Open(t.Context(), name)
	if err != nil {
		t.Fatalf("Open %q: %v", name, err)
	}
	p, err := io.ReadAll(rc)
	if cerr := rc.Close(); cerr != nil {
		t.Errorf("close the reader of %q: %v", name, cerr)
	}
	if err != nil {
		t.Fatalf("read %q: %v", name, err)
	}
	if obj.Name != name || obj.Size != int64(len(p)) || obj.Version == "" {
		t.Errorf("Open %q returned Object{Name: %q, Size: %d, Version: %q}; read %d bytes", name, obj.Name, obj.Size, obj.Version, len(p))
	}
	return p, obj
}

// requireBytes checks that name holds exactly want.
func requireBytes(t *testing.T, b checkpoint.Backend, name string, want []byte) checkpoint.Object {
	t.Helper()
	got, obj := read(t, b, name)
	if !bytes.Equal(got, want) {
		t.Fatalf("%q holds %s; want %s", name, describe(got), describe(want))
	}
	return obj
}

// requireMissing checks that Stat and Open both say name does not exist.
func requireMissing(t *testing.T, b checkpoint.Backend, name string) {
	t.Helper()
	if obj, err := b.Stat(t.Context(), name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat %q = %+v, %v; want an error wrapping fs.ErrNotExist", name, obj, err)
	}
	rc, _, err := b.Open(t.Context(), name)
	if rc != nil {
		rc.Close()
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open %q: %v; want an error wrapping fs.ErrNotExist", name, err)
	}
}

// requireErr checks that err wraps target. The contract's "otherwise say
// what failed and where" is read as applying to errors that wrap no
// sentinel: a store names the object itself (Locate) in the errors it
// returns, so a bare sentinel from a backend loses nothing.
func requireErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v; want an error wrapping %q", what, err, target)
	}
}

func describe(p []byte) string {
	if len(p) <= 16 {
		return fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("%d bytes beginning %q", len(p), p[:16])
}

// listNames returns how many times List returned each name.
func listNames(t *testing.T, b checkpoint.Backend) map[string]int {
	t.Helper()
	objs, err := b.List(t.Context())
	if err != nil {
		t.Fatalf("List %s: %v", b.Locate(""), err)
	}
	n := make(map[string]int, len(objs))
	for _, o := range objs {
		n[o.Name]++
	}
	return n
}

// added returns the names List returns now that it did not return in
// before, sorted, and fails the test if List returns a name twice.
func added(t *testing.T, b checkpoint.Backend, before map[string]int) []string {
	t.Helper()
	var names []string
	for name, n := range listNames(t, b) {
		if n != 1 {
			t.Errorf("List returned %q %d times", name, n)
		}
		if before[name] == 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func requireAdded(t *testing.T, b checkpoint.Backend, before map[string]int, want ...string) {
	t.Helper()
	got := added(t, b, before)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("List returns %q besides what was there at the start; want %q", got, want)
	}
}

func children(t *testing.T, b checkpoint.Backend) []string {
	t.Helper()
	names, err := b.Children(t.Context())
	if err != nil {
		t.Fatalf("Children %s: %v", b.Locate(""), err)
	}
	slices.Sort(names)
	return names
}

// parallel runs f(0) ... f(n-1) in goroutines that start together, and
// returns their errors.
func parallel(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// cancelled returns a context that has ended.
func cancelled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// sub returns b's child store name, closed when the test ends.
func sub(t *testing.T, b checkpoint.Backend, name string, create bool) checkpoint.Backend {
	t.Helper()
	c, err := b.Sub(t.Context(), name, create)
	if err != nil {
		t.Fatalf("Sub %q (create %v) of %s: %v", name, create, b.Locate(""), err)
	}
	if c == nil {
		t.Fatalf("Sub %q of %s returned a nil Backend and no error", name, b.Locate(""))
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close %s: %v", c.Locate(""), err)
		}
	})
	return c
}
