package backendtest_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/storage"
)

// memFlavours are the two kinds of storage a Mem models: object storage,
// and a local directory, with the optional interfaces of package storage.
var memFlavours = []memFlavour{
	{"Remote", nil},
	{"Local", []backendtest.MemOption{backendtest.MemLocal()}},
}

// memFlavour is one kind of storage a Mem models: its name, and the
// options that make a Mem of it.
type memFlavour struct {
	name string
	opts []backendtest.MemOption
}

// inEachFlavour runs test as a parallel subtest, named after the flavour,
// for each of memFlavours.
func inEachFlavour(t *testing.T, test func(t *testing.T, f memFlavour)) {
	for _, f := range memFlavours {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			test(t, f)
		})
	}
}

// The crash model's backend keeps the whole contract, in both flavours
// (the remote one with a lease, as s3store's), so that what the power-cut
// tests find of a store on it holds of a store on any backend.
func TestMemConforms(t *testing.T) {
	inEachFlavour(t, func(t *testing.T, f memFlavour) {
		opts, run := f.opts, []backendtest.Option{backendtest.RewriteInPlace(backendtest.MemRewrite)}
		if f.name == "Remote" {
			opts = append(opts, backendtest.MemLease(leaseTTL))
			run = append(run, backendtest.LeaseTTL(leaseTTL))
		}
		backendtest.Run(t, func(t *testing.T) backendtest.Opener {
			return backendtest.NewMem(opts...).Open
		}, run...)
	})
}

// The crash model's backend runs the sessions suite, in both flavours.
func TestMemRunsSessions(t *testing.T) {
	inEachFlavour(t, func(t *testing.T, f memFlavour) {
		backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
			return memHandle(t, backendtest.NewMem(f.opts...))
		})
	})
}

func memHandle(t *testing.T, m *backendtest.Mem) checkpoint.Backend {
	t.Helper()
	b, err := m.Open()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func memPut(b checkpoint.Backend, name, s string) error {
	_, err := b.Replace(context.Background(), name, "", func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	})
	return err
}

// memContents returns name=content for every object of b and of its child
// stores, sorted.
func memContents(t *testing.T, b checkpoint.Backend) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	var walk func(b checkpoint.Backend, prefix string)
	walk = func(b checkpoint.Backend, prefix string) {
		objs, err := b.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			rc, _, err := b.Open(ctx, o.Name)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := io.ReadAll(rc)
			rc.Close()
			out = append(out, prefix+o.Name+"="+string(p))
		}
		children, err := b.Children(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range children {
			sub, err := b.Sub(ctx, c, false)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, prefix+c+"/")
			walk(sub, prefix+c+"/")
		}
	}
	walk(b, "")
	slices.Sort(out)
	return out
}

func crashContents(t *testing.T, m *backendtest.Mem, percent int) []string {
	t.Helper()
	return memContents(t, memHandle(t, m.CrashClone(backendtest.CrashCloneConfig{UnsyncedPercent: percent})))
}

// A power cut keeps what every call that returned nil made durable, and
// of the call it interrupts, nothing, all of it, or some of it as a
// directory may persist it (any of a Remove's removals; a Rename's new
// name without the removal of the old, never the reverse); every call
// from the cut on fails with ErrPowerCut.
func TestMemCrashCloneKeepsWhatWasDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		cut        func(b checkpoint.Backend) error
		lost, kept []string
	}{
		{"Replace", func(b checkpoint.Backend) error { return memPut(b, "a", "new") },
			[]string{"a=old", "b=b", "c/", "c/x=x"}, []string{"a=new", "b=b", "c/", "c/x=x"}},
		{"Create", func(b checkpoint.Backend) error {
			_, err := b.Create(ctx, "n", func(w io.Writer) error { _, err := io.WriteString(w, "n"); return err })
			return err
		}, []string{"a=old", "b=b", "c/", "c/x=x"}, []string{"a=old", "b=b", "c/", "c/x=x", "n=n"}},
		{"Remove", func(b checkpoint.Backend) error { _, err := b.Remove(ctx, "a", "b"); return err },
			[]string{"a=old", "b=b", "c/", "c/x=x"}, []string{"c/", "c/x=x"}},
		{"Rename", func(b checkpoint.Backend) error { return b.Rename(ctx, "a", "z") },
			[]string{"a=old", "b=b", "c/", "c/x=x"}, []string{"b=b", "c/", "c/x=x", "z=old"}},
		{"SubCreate", func(b checkpoint.Backend) error { _, err := b.Sub(ctx, "d", true); return err },
			[]string{"a=old", "b=b", "c/", "c/x=x"}, []string{"a=old", "b=b", "c/", "c/x=x", "d/"}},
		{"ChildWrite", func(b checkpoint.Backend) error {
			sub, err := b.Sub(ctx, "c", false)
			if err != nil {
				return err
			}
			return memPut(sub, "x", "x2")
		}, []string{"a=old", "b=b", "c/", "c/x=x"}, []string{"a=old", "b=b", "c/", "c/x=x2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := backendtest.NewMem()
			b := memHandle(t, m)
			sub, err := b.Sub(ctx, "c", false)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{memPut(b, "a", "old"), memPut(b, "b", "b"), memPut(sub, "x", "x")} {
				if err != nil {
					t.Fatal(err)
				}
			}
			m.CutPowerAt(1)
			if err := c.cut(b); !errors.Is(err, backendtest.ErrPowerCut) {
				t.Fatalf("the call the power is cut at returned %v; want ErrPowerCut", err)
			}
			if !m.PowerCut() {
				t.Fatal("PowerCut is false after the cut")
			}
			if _, err := b.Stat(ctx, "b"); !errors.Is(err, backendtest.ErrPowerCut) {
				t.Fatalf("Stat after the cut: %v; want ErrPowerCut", err)
			}
			if got := crashContents(t, m, 0); !slices.Equal(got, c.lost) {
				t.Errorf("durable only: %q; want %q", got, c.lost)
			}
			if got := crashContents(t, m, 100); !slices.Equal(got, c.kept) {
				t.Errorf("every change kept: %q; want %q", got, c.kept)
			}
			seen := map[string]bool{}
			for seed := range uint64(32) {
				clone := m.CrashClone(backendtest.CrashCloneConfig{UnsyncedPercent: 50, Rand: rand.New(rand.NewPCG(seed, 1))})
				got := memContents(t, memHandle(t, clone))
				ok := slices.Equal(got, c.lost) || slices.Equal(got, c.kept)
				switch c.name {
				case "Remove": // each removal on its own
					ok = ok || slices.Equal(got, []string{"b=b", "c/", "c/x=x"}) || slices.Equal(got, []string{"a=old", "c/", "c/x=x"})
				case "Rename": // the new name, then the removal of the old
					ok = ok || slices.Equal(got, []string{"a=old", "b=b", "c/", "c/x=x", "z=old"})
				}
				if !ok {
					t.Errorf("seed %d: %q; want %q or %q", seed, got, c.lost, c.kept)
				}
				seen[strings.Join(got, " ")] = true
			}
			if !seen[strings.Join(c.lost, " ")] || !seen[strings.Join(c.kept, " ")] {
				t.Errorf("32 crashes keeping half the unsynced changes gave %q; want both %q and %q among them", slices.Sorted(maps.Keys(seen)), c.lost, c.kept)
			}
			if (c.name == "Remove" || c.name == "Rename") && len(seen) < 3 {
				t.Errorf("32 crashes keeping half the unsynced changes gave only %q: want a partial %s among them", slices.Sorted(maps.Keys(seen)), c.name)
			}
		})
	}
}

// What a Mem with MemNoSync holds is lost whole by a power cut, and so is
// the change of the one operation a mutant never syncs; the clone holds no
// lock, and its handles work.
func TestMemCrashCloneLosesUnsynced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemNoSync())
	b := memHandle(t, m)
	if err := memPut(b, "a", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := crashContents(t, m, 0); len(got) != 0 {
		t.Errorf("a NoSync Mem's crash keeps %q; want nothing", got)
	}
	if got := crashContents(t, m, 100); !slices.Equal(got, []string{"a=a"}) {
		t.Errorf("with every unsynced change kept: %q; want a=a", got)
	}
	clone := memHandle(t, m.CrashClone(backendtest.CrashCloneConfig{UnsyncedPercent: 100}))
	if _, err := clone.Lock(ctx); err != nil {
		t.Errorf("the lock of the crashed process survived the crash: %v", err)
	}

	lossy := backendtest.NewMemLosing("remove")
	b = memHandle(t, lossy)
	if err := errors.Join(memPut(b, "a", "a"), memPut(b, "b", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a removal that is not durable is not seen: %v", err)
	}
	if got := crashContents(t, lossy, 0); !slices.Equal(got, []string{"a=a", "b=b"}) {
		t.Errorf("after an unsynced Remove: %q; want a=a b=b", got)
	}
	if got := strings.Join(crashContents(t, lossy, 100), " "); got != "b=b" {
		t.Errorf("with the removal kept: %q; want b=b", got)
	}
}

// Ops counts every mutating call, refused ones too, so that a scenario's
// count does not depend on what its calls find.
func TestMemOpsCountsMutatingCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem()
	b := memHandle(t, m)
	write := func(w io.Writer) error { return nil }
	b.Create(ctx, "a", write)
	b.Create(ctx, "a", write) // ErrExists
	b.Replace(ctx, "a", "v0", write)
	b.Rename(ctx, "missing", "b")
	b.Remove(ctx, "a", "b")
	b.Sub(ctx, "c", true)
	b.Sub(ctx, "d", false) // not a mutating call
	b.List(ctx)
	b.Stat(ctx, "a")
	if got := m.Ops(); got != 6 {
		t.Fatalf("Ops = %d; want 6", got)
	}
}

// A handle's Close releases the locks it holds, as closing a directory's
// lock file does, and no other handle's.
func TestMemCloseReleasesItsOwnLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem()
	a, b, c := memHandle(t, m), memHandle(t, m), memHandle(t, m)
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(ctx); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("Lock after another handle's Close: %v; want ErrLocked", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(ctx); err != nil {
		t.Fatalf("Lock after the holder's Close: %v", err)
	}
}

// A Mem models object storage by default and a local directory with
// MemLocal, in every handle and child store: only the latter is Local and
// has the optional interfaces of a directory (package storage's, and
// storage.Linker and storage.ChildRemover).
func TestMemFlavours(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, local := range []bool{false, true} {
		var opts []backendtest.MemOption
		if local {
			opts = append(opts, backendtest.MemLocal())
		}
		root := memHandle(t, backendtest.NewMem(opts...))
		child, err := root.Sub(ctx, "c", false)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []checkpoint.Backend{root, child} {
			_, unsynced := b.(storage.Unsynced)
			_, temps := b.(storage.TempCleaner)
			_, prober := b.(storage.LockProber)
			_, linker := b.(storage.Linker)
			_, remover := b.(storage.ChildRemover)
			if got := storage.TraitsOf(b).Local; got != local || unsynced != local || temps != local || prober != local || linker != local || remover != local {
				t.Errorf("MemLocal %v: %s is Local %v, Unsynced %v, TempCleaner %v, LockProber %v, Linker %v, ChildRemover %v; want all %v",
					local, b.Locate(""), got, unsynced, temps, prober, linker, remover, local)
			}
		}
	}
}

// On a local Mem, a ReplaceUnsynced or RemoveUnsynced is seen at once and
// made durable by nothing of its own: a power cut keeps it or not, whole,
// until a later call that syncs its directory (a durable call of the same
// store, or a Sub with create in it) makes it durable; a durable call of
// another directory (a child store) does not.
func TestMemLocalUnsyncedChangesNeedADirectorySync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	unsynced, synced := []string{"a=a", "b=b"}, []string{"b=b2"} // the root's objects
	for _, c := range []struct {
		name    string
		sync    func(root, child checkpoint.Backend) error
		durable []string // what a power cut keeps of the root's objects
		all     []string // what it keeps with every change that was not durable
	}{
		{"Nothing", func(root, child checkpoint.Backend) error { return nil }, unsynced, synced},
		{"ChildWrite", func(root, child checkpoint.Backend) error { return memPut(child, "x", "x2") }, unsynced, synced},
		{"Create", func(root, child checkpoint.Backend) error {
			_, err := root.Create(ctx, "n", func(w io.Writer) error { _, err := io.WriteString(w, "n"); return err })
			return err
		}, []string{"b=b2", "n=n"}, []string{"b=b2", "n=n"}},
		{"Remove", func(root, child checkpoint.Backend) error { _, err := root.Remove(ctx); return err }, synced, synced},
		{"SubCreate", func(root, child checkpoint.Backend) error { _, err := root.Sub(ctx, "d", true); return err }, synced, synced},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := backendtest.NewMem(backendtest.MemLocal())
			root := memHandle(t, m)
			child, err := root.Sub(ctx, "c", false)
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(memPut(root, "a", "a"), memPut(root, "b", "b"), memPut(child, "x", "x")); err != nil {
				t.Fatal(err)
			}
			u := root.(storage.Unsynced)
			if gone, err := u.RemoveUnsynced(ctx, "a"); err != nil || !gone[0] {
				t.Fatalf("RemoveUnsynced: %v, %v", gone, err)
			}
			if _, err := u.ReplaceUnsynced(ctx, "b", func(w io.Writer) error { _, err := io.WriteString(w, "b2"); return err }); err != nil {
				t.Fatal(err)
			}
			rootOnly := func(list []string) []string {
				return slices.DeleteFunc(list, func(s string) bool { return strings.Contains(s, "/") })
			}
			if got := rootOnly(memContents(t, root)); !slices.Equal(got, synced) {
				t.Fatalf("the unsynced changes are not seen at once: %q; want %q", got, synced)
			}
			if err := c.sync(root, child); err != nil {
				t.Fatal(err)
			}
			if got := rootOnly(crashContents(t, m, 0)); !slices.Equal(got, c.durable) {
				t.Errorf("durable only: %q; want %q", got, c.durable)
			}
			if got := rootOnly(crashContents(t, m, 100)); !slices.Equal(got, c.all) {
				t.Errorf("every change kept: %q; want %q", got, c.all)
			}
		})
	}
}

// With TearUnsynced, an object a ReplaceUnsynced wrote that survives a
// crash holds the first half of its bytes, under a new Version, whether a
// directory sync or chance kept it; an object a durable call wrote is
// whole.
func TestMemCrashCloneTearsUnsyncedBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemLocal())
	b := memHandle(t, m)
	if err := errors.Join(memPut(b, "a", "aaaa"), memPut(b, "b", "bbbb")); err != nil {
		t.Fatal(err)
	}
	written, err := b.(storage.Unsynced).ReplaceUnsynced(ctx, "a", func(w io.Writer) error { _, err := io.WriteString(w, "AAAAAA"); return err })
	if err != nil {
		t.Fatal(err)
	}
	torn := func(percent int) (checkpoint.Backend, []string) {
		clone := memHandle(t, m.CrashClone(backendtest.CrashCloneConfig{UnsyncedPercent: percent, TearUnsynced: true}))
		return clone, memContents(t, clone)
	}
	if _, got := torn(0); !slices.Equal(got, []string{"a=aaaa", "b=bbbb"}) {
		t.Errorf("lost unsynced write, torn: %q; want the old a", got)
	}
	clone, got := torn(100)
	if !slices.Equal(got, []string{"a=AAA", "b=bbbb"}) {
		t.Errorf("kept unsynced write, torn: %q; want its first half", got)
	}
	if o, err := clone.Stat(ctx, "a"); err != nil || o.Version == written.Version {
		t.Errorf("a torn object has the Version of the whole one (%v, %v)", o, err)
	}
	if err := memPut(b, "c", "c"); err != nil { // syncs the directory
		t.Fatal(err)
	}
	if _, got := torn(0); !slices.Equal(got, []string{"a=AAA", "b=bbbb", "c=c"}) {
		t.Errorf("synced entry of an unsynced write, torn: %q; want its first half", got)
	}
	if got := crashContents(t, m, 0); !slices.Equal(got, []string{"a=AAAAAA", "b=bbbb", "c=c"}) {
		t.Errorf("synced entry of an unsynced write, not torn: %q; want it whole", got)
	}
}

// A local Mem links an object of one child store into a sibling, durably,
// sharing its bytes, as hard links do, and refuses what the Linker
// contract refuses; it removes an empty child store durably, and no other.
func TestMemLocalLinksAndRemovesChildren(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemLocal())
	root := memHandle(t, m)
	sub := func(b checkpoint.Backend, name string, create bool) checkpoint.Backend {
		t.Helper()
		c, err := b.Sub(ctx, name, create)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, f := sub(root, "a", false), sub(root, "f", false)
	if err := memPut(a, "x", "x"); err != nil {
		t.Fatal(err)
	}
	link := func(dst, src checkpoint.Backend, name string) error {
		_, err := dst.(storage.Linker).Link(ctx, src, name)
		return err
	}
	if err := link(f, a, "x"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what     string
		dst, src checkpoint.Backend
		name     string
		want     error
	}{
		{"an existing name", f, a, "x", checkpoint.ErrExists},
		{"a missing name", f, a, "y", fs.ErrNotExist},
		{"from the parent", f, root, "x", errors.ErrUnsupported},
		{"from a grandchild", f, sub(a, "g", false), "x", errors.ErrUnsupported},
	} {
		if err := link(c.dst, c.src, c.name); !errors.Is(err, c.want) {
			t.Errorf("Link of %s: %v; want %v", c.what, err, c.want)
		}
	}
	if got := crashContents(t, m, 0); !slices.Equal(got, []string{"a/", "a/x=x", "f/", "f/x=x"}) {
		t.Errorf("after a Link, durable only: %q", got)
	}

	remover := root.(storage.ChildRemover)
	sub(root, "e", true)
	if err := memPut(root, "o", "o"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want error
	}{{"a", checkpoint.ErrExists}, {"o", checkpoint.ErrInvalid}, {"missing", nil}, {"e", nil}} {
		if err := remover.RemoveChild(ctx, c.name); !errors.Is(err, c.want) {
			t.Errorf("RemoveChild(%s): %v; want %v", c.name, err, c.want)
		}
	}
	if got := crashContents(t, m, 0); !slices.Equal(got, []string{"a/", "a/x=x", "f/", "f/x=x", "o=o"}) {
		t.Errorf("after RemoveChild, durable only: %q", got)
	}
}

// A write of a local Mem that the power is cut in may leave its temporary
// object, which RemoveTemps removes if its caller accepts the final name,
// and no object a write published, whatever its name.
func TestMemLocalCutWriteLeavesATemp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemLocal())
	b := memHandle(t, m)
	if err := memPut(b, ".n.mem-tmp", "not a temp"); err != nil {
		t.Fatal(err)
	}
	m.CutPowerAt(1)
	if err := memPut(b, "n", "n"); !errors.Is(err, backendtest.ErrPowerCut) {
		t.Fatalf("the cut write: %v", err)
	}
	if got := backendtest.MemTemps(memHandle(t, m.CrashClone(backendtest.CrashCloneConfig{}))); len(got) != 0 {
		t.Errorf("durable only: temporary objects %q", got)
	}
	clone := memHandle(t, m.CrashClone(backendtest.CrashCloneConfig{UnsyncedPercent: 100}))
	temps := backendtest.MemTemps(clone)
	if len(temps) != 1 {
		t.Fatalf("every change kept: temporary objects %q; want one", temps)
	}
	tc := clone.(storage.TempCleaner)
	var asked []string
	removed, err := tc.RemoveTemps(ctx, func(final string, legacy bool) bool { asked = append(asked, final); return false })
	if err != nil || len(removed) > 0 || !slices.Equal(asked, []string{"n"}) {
		t.Fatalf("RemoveTemps refusing all: removed %q (%v), asked %q; want nothing removed, asked n", removed, err, asked)
	}
	removed, err = tc.RemoveTemps(ctx, func(string, bool) bool { return true })
	if err != nil || !slices.Equal(removed, temps) {
		t.Fatalf("RemoveTemps: removed %q (%v); want %q", removed, err, temps)
	}
	if got := memContents(t, clone); !slices.Equal(got, []string{".n.mem-tmp=not a temp", "n=n"}) {
		t.Errorf("after RemoveTemps: %q", got)
	}
}
