package backendtest

import (
	"errors"

	"io/fs"
	"slices"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

func (s *suite) subCases() []testCase {
	return []testCase{
		{"ListExcludesChildren", s.testListExcludesChildren},
		{"ChildrenAreSeparateStores", s.testChildrenAreSeparateStores},
		{"ChildrenListsChildStores", s.testChildrenListsChildStores},
		{"ChildStoreIsNotAnObject", s.testChildStoreIsNotAnObject},
	}
}

// A parent's List returns neither its children's objects nor, as regular
// objects, the child stores themselves: a backend whose List reads names
// only (a local directory) may list a child's name, with an unknown
// Version, and then Stat must say it is no regular object.
func (s *suite) testListExcludesChildren(t *testing.T) {
	b := s.one(t)
	before := listNames(t, b)
	create(t, b, "parent.json", payload(1, 10))
	sub(t, b, "empty", true)
	full := sub(t, b, "full", false)
	create(t, full, "child.json", payload(2, 10))
	grand := sub(t, full, "grand", true)
	create(t, grand, "grandchild.json", payload(3, 10))
	requireAddedObjects(t, b, before, "parent.json")
	requireAddedObjects(t, full, map[string]int{}, "child.json")
}

// requireAddedObjects is requireAdded, but for the names of child stores,
// which a List that does not know types may return (see
// testListExcludesChildren).
func requireAddedObjects(t *testing.T, b checkpoint.Backend, before map[string]int, want ...string) {
	t.Helper()
	objs, err := b.List(t.Context())
	if err != nil {
		t.Fatalf("List %s: %v", b.Locate(""), err)
	}
	var got []string
	for _, o := range objs {
		if before[o.Name] > 0 {
			continue
		}
		if !slices.Contains(want, o.Name) {
			if o.Version != "" {
				t.Fatalf("List returns %q (%+v), a child store or its object, as an object", o.Name, o)
			}
			st, err := b.Stat(t.Context(), o.Name)
			if err == nil && st.Mode.Type() == 0 {
				t.Fatalf("List returns %q, which Stat says is a regular object; want %q only", o.Name, want)
			}
			continue
		}
		got = append(got, o.Name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("List returns the objects %q besides what was there at the start; want %q", got, want)
	}
}

// A child's objects are not its parent's, nor its sibling's, and the
// same name in each holds its own object.
func (s *suite) testChildrenAreSeparateStores(t *testing.T) {
	bs := s.handles(t, 2)
	b := bs[0]
	one := sub(t, b, "one", false)
	two := sub(t, b, "two", true)
	const name = "same.json"
	create(t, one, name, payload(1, 100))
	requireMissing(t, b, name)
	requireMissing(t, two, name)
	create(t, b, name, payload(2, 100))
	create(t, two, name, payload(3, 100))
	requireBytes(t, one, name, payload(1, 100))
	requireBytes(t, b, name, payload(2, 100))
	requireBytes(t, two, name, payload(3, 100))
	if _, err := one.Remove(t.Context(), name); err != nil {
		t.Fatalf("Remove in a child: %v", err)
	}
	requireBytes(t, b, name, payload(2, 100))
	requireBytes(t, two, name, payload(3, 100))

	// Another process reaches the same child by name.
	again := sub(t, bs[1], "two", false)
	requireBytes(t, again, name, payload(3, 100))
	requireAdded(t, again, map[string]int{}, name)
}

// Children lists a child once something is written in it, on every
// handle (one made with Sub(create=true) may be listed before); it lists
// neither objects nor grandchildren.
func (s *suite) testChildrenListsChildStores(t *testing.T) {
	bs := s.handles(t, 2)
	b := bs[0]
	create(t, b, "object.json", payload(1, 10))
	lazy := sub(t, b, "lazy", false)
	if got := children(t, b); len(got) != 0 {
		t.Fatalf("Children = %q before any child was created or written; Sub(create=false) creates nothing", got)
	}
	made := sub(t, b, "made", true)
	sub(t, b, "made", true)
	// Object storage has nothing to create for a child: it may be listed
	// only once it holds an object.
	for _, h := range bs {
		if got := children(t, h); len(got) > 1 || len(got) == 1 && got[0] != "made" {
			t.Fatalf("Children on %s = %q after Sub(create=true) of %q", h.Locate(""), got, "made")
		}
	}
	create(t, made, "made.json", payload(3, 10))
	create(t, lazy, "first.json", payload(2, 10))
	sub(t, made, "grand", true)
	for _, h := range bs {
		if got := children(t, h); !slices.Equal(got, []string{"lazy", "made"}) {
			t.Fatalf("Children on %s = %q after a write in %q; want [lazy made]", h.Locate(""), got, "lazy")
		}
	}
	if got := children(t, made); !slices.Equal(got, []string{"grand"}) {
		t.Fatalf("Children of a child = %q; want [grand]", got)
	}
	if got := children(t, lazy); len(got) != 0 {
		t.Fatalf("Children of a child that has none = %q", got)
	}
}

// The name of a child store is not an object: Open fails on it, at once
// (a directory is no object to read), and Stat either finds nothing or
// says by Mode that it is no regular object.
func (s *suite) testChildStoreIsNotAnObject(t *testing.T) {
	b := s.one(t)
	child := sub(t, b, "kid", true)
	create(t, child, "in.json", payload(1, 10))
	rc, _, err := b.Open(t.Context(), "kid")
	if err == nil {
		rc.Close()
		t.Fatalf("Open of the child store %q succeeded; it is not an object", "kid")
	}
	obj, err := b.Stat(t.Context(), "kid")
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		t.Fatalf("Stat of the child store %q: %v; want its Object (with a Mode) or fs.ErrNotExist", "kid", err)
	case obj.Mode.Type() == 0:
		t.Fatalf("Stat of the child store %q = %+v: Mode says a regular object", "kid", obj)
	}
}
