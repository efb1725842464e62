package backendtest

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
)

func (s *suite) subCases() []testCase {
	return []testCase{
		{"ListExcludesChildren", s.testListExcludesChildren},
		{"ChildrenAreSeparateStores", s.testChildrenAreSeparateStores},
		{"ChildrenListsChildStores", s.testChildrenListsChildStores},
		{"ChildStoreIsNotAnObject", s.testChildStoreIsNotAnObject},
	}
}

// A parent's List returns neither its child stores nor their objects.
func (s *suite) testListExcludesChildren(t *testing.T) {
	b := s.one(t)
	before := listNames(t, b)
	create(t, b, "parent.json", payload(1, 10))
	sub(t, b, "empty", true)
	full := sub(t, b, "full", false)
	create(t, full, "child.json", payload(2, 10))
	grand := sub(t, full, "grand", true)
	create(t, grand, "grandchild.json", payload(3, 10))
	requireAdded(t, b, before, "parent.json")
	requireAdded(t, full, map[string]int{}, "child.json")
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

// Children lists a child made with Sub(create=true) at once, and one made
// with Sub(create=false) once something is written in it, on every
// handle; it lists neither objects nor grandchildren.
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
	for _, h := range bs {
		if got := children(t, h); !slices.Equal(got, []string{"made"}) {
			t.Fatalf("Children on %s = %q after Sub(create=true) of %q", h.Locate(""), got, "made")
		}
	}
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
