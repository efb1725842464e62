package backendtest

import (
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

func (s *suite) listCases() []testCase {
	return []testCase{
		{"ListPastOnePage", s.testListPastOnePage},
		{"RemoveReportsEachName", s.testRemoveReportsEachName},
		{"RenameMoves", s.testRenameMoves},
		{"RenameRefusesExisting", s.testRenameRefusesExisting},
		{"RenameNeverReplacesACreate", s.testRenameNeverReplacesACreate},
		{"LocateIsDistinct", s.testLocateIsDistinct},
		{"NamesOutsideTheNamespaceRefused", s.testNamesOutsideTheNamespaceRefused},
	}
}

// pageObjects is more than one page of a listing (S3 returns at most
// 1,000 keys a request).
const pageObjects = 1001

// List returns every object exactly once when there are more than a
// page of them, on every handle; where it tells an object's Size and
// Version, they are the object's.
func (s *suite) testListPastOnePage(t *testing.T) {
	bs := s.handles(t, 2)
	before := listNames(t, bs[0])
	objs := make([]checkpoint.Object, pageObjects)
	var next atomic.Int64
	// One writer per handle: more do not make a local directory faster
	// (creates in one directory contend in the kernel).
	const workers = 2
	errs := parallel(workers, func(w int) error {
		for {
			i := int(next.Add(1)) - 1
			if i >= pageObjects {
				return nil
			}
			name := fmt.Sprintf("page-%05d.json", i)
			var err error
			objs[i], err = bs[w%2].Create(t.Context(), name, writeBytes([]byte(name)))
			if err != nil {
				return fmt.Errorf("create %q: %w", name, err)
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := make(map[string]checkpoint.Object, pageObjects)
	for _, o := range objs {
		want[o.Name] = o
	}
	for _, b := range bs {
		list, err := b.List(t.Context())
		if err != nil {
			t.Fatalf("List %s: %v", b.Locate(""), err)
		}
		seen := make(map[string]int, len(list))
		for _, o := range list {
			seen[o.Name]++
			if seen[o.Name] == 2 {
				t.Errorf("List on %s returned %q more than once", b.Locate(""), o.Name)
			}
			w, ours := want[o.Name]
			if !ours {
				if before[o.Name] == 0 {
					t.Errorf("List on %s returned %q, which was never written", b.Locate(""), o.Name)
				}
				continue
			}
			if o.Size != -1 && o.Size != w.Size {
				t.Errorf("List says %q has Size %d; it has %d (List may say -1 if it does not know)", o.Name, o.Size, w.Size)
			}
			if o.Version != "" && o.Version != w.Version {
				t.Errorf("List says %q has Version %q; Create returned %q (List may say \"\" if it does not know)", o.Name, o.Version, w.Version)
			}
		}
		missing := 0
		for name := range want {
			if seen[name] == 0 {
				if missing++; missing <= 5 {
					t.Errorf("List on %s did not return %q", b.Locate(""), name)
				}
			}
		}
		if missing > 0 {
			t.Fatalf("List on %s returned %d objects; %d of the %d written are missing", b.Locate(""), len(list), missing, pageObjects)
		}
	}
}

// Remove deletes each name given and says, per name, that it is gone: a
// name already missing is gone, not an error.
func (s *suite) testRemoveReportsEachName(t *testing.T) {
	bs := s.handles(t, 2)
	before := listNames(t, bs[0])
	create(t, bs[0], "a.json", payload(1, 10))
	create(t, bs[0], "b.json", payload(2, 10))
	create(t, bs[0], "kept.json", payload(3, 10))

	names := []string{"a.json", "missing.json", "b.json"}
	gone, err := bs[1].Remove(t.Context(), names...)
	if err != nil {
		t.Fatalf("Remove %q: %v", names, err)
	}
	if len(gone) != len(names) {
		t.Fatalf("Remove of %d names returned %d results", len(names), len(gone))
	}
	for i, name := range names {
		if !gone[i] {
			t.Errorf("Remove says %q is not gone", name)
		}
		requireMissing(t, bs[0], name)
	}
	requireBytes(t, bs[0], "kept.json", payload(3, 10))
	requireAdded(t, bs[0], before, "kept.json")

	gone, err = bs[0].Remove(t.Context(), "a.json")
	if err != nil || len(gone) != 1 || !gone[0] {
		t.Fatalf("Remove of a removed name = %v, %v; want [true], nil", gone, err)
	}
	gone, err = bs[0].Remove(t.Context())
	if err != nil || len(gone) != 0 {
		t.Fatalf("Remove of no names = %v, %v; want no results and no error", gone, err)
	}
}

// Rename moves an object to a free name: the bytes are under the new name
// and nothing is under the old one.
func (s *suite) testRenameMoves(t *testing.T) {
	bs := s.handles(t, 2)
	before := listNames(t, bs[0])
	p := payload(1, 70000)
	create(t, bs[0], "damaged.json", p)
	if err := bs[0].Rename(t.Context(), "damaged.json", "damaged.json.corrupt"); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	requireMissing(t, bs[1], "damaged.json")
	requireBytes(t, bs[1], "damaged.json.corrupt", p)
	requireAdded(t, bs[1], before, "damaged.json.corrupt")
	// The old name is free again.
	create(t, bs[1], "damaged.json", payload(2, 10))
}

// Rename to a taken name fails with ErrExists and changes neither object;
// Rename of a missing name fails with fs.ErrNotExist and creates nothing.
func (s *suite) testRenameRefusesExisting(t *testing.T) {
	b := s.one(t)
	from := create(t, b, "from.json", payload(1, 100))
	to := create(t, b, "to.json", payload(2, 100))
	before := listNames(t, b)
	err := b.Rename(t.Context(), "from.json", "to.json")
	requireErr(t, "Rename to a taken name", err, checkpoint.ErrExists)
	if got := requireBytes(t, b, "from.json", payload(1, 100)); got.Version != from.Version {
		t.Errorf("a refused Rename changed the Version of its source")
	}
	if got := requireBytes(t, b, "to.json", payload(2, 100)); got.Version != to.Version {
		t.Errorf("a refused Rename changed the Version of its destination")
	}
	err = b.Rename(t.Context(), "nothing.json", "somewhere.json")
	requireErr(t, "Rename of a missing name", err, fs.ErrNotExist)
	requireMissing(t, b, "somewhere.json")
	requireAdded(t, b, before)
}

// renameRaces is how many times RenameNeverReplacesACreate races a Rename
// against a Create of its destination: a check of the destination before
// an overwriting move loses some races, not all.
const renameRaces = 100

// A Rename racing a Create of its destination never destroys the created
// object: of the two, exactly one succeeds and the other fails with
// ErrExists. If the Create wins, the destination holds its bytes and the
// source is as it was; if the Rename wins, the destination holds the
// source's bytes and the source is gone.
func (s *suite) testRenameNeverReplacesACreate(t *testing.T) {
	bs := s.handles(t, 2)
	moved, created := payload(1, 300), payload(2, 300)
	wins := [2]int{}
	for i := range renameRaces {
		from, to := fmt.Sprintf("race-%03d.json", i), fmt.Sprintf("race-%03d.json.corrupt", i)
		create(t, bs[0], from, moved)
		// The goroutine started first alternates: a scheduler that runs
		// them one after the other (one processor) still has each go
		// first in half the races.
		rename := i % 2
		errs := parallel(2, func(k int) error {
			if k == rename {
				return bs[0].Rename(t.Context(), from, to)
			}
			_, err := bs[1].Create(t.Context(), to, writeBytes(created))
			return err
		})
		if rename == 1 {
			errs[0], errs[1] = errs[1], errs[0] // errs[0] is the Rename's
		}
		renamed, made := errs[0] == nil, errs[1] == nil
		switch {
		case renamed == made:
			t.Fatalf("race %d: Rename %q to %q returned %v and Create %q returned %v; want exactly one to succeed", i, from, to, errs[0], to, errs[1])
		case made:
			requireErr(t, fmt.Sprintf("race %d: Rename to %q, which a Create made first", i, to), errs[0], checkpoint.ErrExists)
			requireBytes(t, bs[0], to, created)
			requireBytes(t, bs[0], from, moved)
			wins[1]++
		default:
			requireErr(t, fmt.Sprintf("race %d: Create %q, which a Rename made first", i, to), errs[1], checkpoint.ErrExists)
			requireBytes(t, bs[0], to, moved)
			requireMissing(t, bs[0], from)
			wins[0]++
		}
	}
	t.Logf("of %d races, Rename won %d and Create %d", renameRaces, wins[0], wins[1])
}

// Locate names every object differently, and the backend itself
// differently again; a child store's names differ from its parent's.
func (s *suite) testLocateIsDistinct(t *testing.T) {
	b := s.one(t)
	child := sub(t, b, "child", false)
	seen := map[string]string{}
	for _, bk := range []struct {
		what string
		b    checkpoint.Backend
	}{{"the store", b}, {"its child", child}} {
		for _, name := range []string{"", "a.json", "a.json.tmp", "b.json", "x"} {
			loc := bk.b.Locate(name)
			what := fmt.Sprintf("Locate(%q) of %s", name, bk.what)
			if loc == "" {
				t.Errorf("%s is empty", what)
				continue
			}
			if !strings.Contains(loc, name) {
				t.Errorf("%s = %q, which does not contain the name", what, loc)
			}
			if prev, ok := seen[loc]; ok {
				t.Errorf("%s = %q, the same as %s", what, loc, prev)
			}
			seen[loc] = what
		}
	}
}

// Names that would leave the flat namespace (a path into a child store or
// out of the store, "." or "..", an empty name) are refused by every method
// that takes a name: nothing is written, read, moved or removed through
// one.
func (s *suite) testNamesOutsideTheNamespaceRefused(t *testing.T) {
	b := s.one(t)
	create(t, b, "ok.json", payload(1, 10))
	kid := sub(t, b, "kid", true)
	create(t, kid, "in.json", payload(2, 10))
	before := listNames(t, b)
	for _, bad := range []string{"", ".", "..", "kid/in.json", "kid/new.json", "a/b", "../escape", "/abs", "ok.json/x"} {
		ctx := t.Context()
		if _, err := b.Create(ctx, bad, writeBytes(payload(3, 10))); err == nil {
			t.Errorf("Create %q succeeded; a name is [A-Za-z0-9._-], never . or ..", bad)
		}
		if _, err := b.Replace(ctx, bad, "", writeBytes(payload(3, 10))); err == nil {
			t.Errorf("Replace %q succeeded", bad)
		}
		if _, err := b.Stat(ctx, bad); err == nil {
			t.Errorf("Stat %q succeeded", bad)
		}
		if rc, _, err := b.Open(ctx, bad); err == nil {
			rc.Close()
			t.Errorf("Open %q succeeded", bad)
		}
		if err := b.Rename(ctx, "ok.json", bad); err == nil {
			t.Errorf("Rename to %q succeeded", bad)
			create(t, b, "ok.json", payload(1, 10))
		}
		if c, err := b.Sub(ctx, bad, true); err == nil {
			t.Errorf("Sub %q succeeded; a child store's name is a name", bad)
			c.Close()
		}
		_, _ = b.Remove(ctx, bad)
	}
	requireAdded(t, b, before)
	requireBytes(t, b, "ok.json", payload(1, 10))
	requireAdded(t, kid, map[string]int{}, "in.json")
	requireBytes(t, kid, "in.json", payload(2, 10))
	if got := children(t, b); len(got) != 1 || got[0] != "kid" {
		t.Errorf("Children = %q after only refused names were used; want [kid]", got)
	}
}
