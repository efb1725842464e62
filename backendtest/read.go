package backendtest

import (
	"bytes"
	"io"
	"testing"
)

func (s *suite) readCases() []testCase {
	return []testCase{
		{"OpenEarlyClose", s.testOpenEarlyClose},
		{"OpenAgreesWithStat", s.testOpenAgreesWithStat},
		{"OpenStreamIsOneObject", s.testOpenStreamIsOneObject},
		{"MissingIsNotExist", s.testMissingIsNotExist},
		{"VersionIsStable", s.testVersionIsStable},
		{"WritesVisibleToOtherHandles", s.testWritesVisibleToOtherHandles},
	}
}

const largeSize = 4<<20 + 5

// A large object can be opened, read a little and closed, many times and
// several at once, without error and without disturbing later reads,
// which return its exact bytes.
func (s *suite) testOpenEarlyClose(t *testing.T) {
	b := s.one(t)
	const name = "large.json"
	p := payload(1, largeSize)
	create(t, b, name, p)
	for round := range 3 {
		var rcs []io.ReadCloser
		for i := range 4 {
			rc, obj, err := b.Open(t.Context(), name)
			if err != nil {
				t.Fatalf("Open %q (round %d, reader %d): %v", name, round, i, err)
			}
			if obj.Size != largeSize {
				t.Fatalf("Open %q returned Size %d; want %d", name, obj.Size, largeSize)
			}
			rcs = append(rcs, rc)
		}
		for i, rc := range rcs {
			if i == 0 {
				continue // closed without reading a byte
			}
			head := make([]byte, 100*i)
			if _, err := io.ReadFull(rc, head); err != nil {
				t.Fatalf("read the first %d bytes of %q: %v", len(head), name, err)
			}
			if !bytes.Equal(head, p[:len(head)]) {
				t.Fatalf("the first %d bytes of %q are %s; want %s", len(head), name, describe(head), describe(p[:len(head)]))
			}
		}
		for _, rc := range rcs {
			if err := rc.Close(); err != nil {
				t.Fatalf("close a reader of %q before its end: %v", name, err)
			}
		}
	}
	requireBytes(t, b, name, p)
}

// Open's Object is the object Stat describes: the same Name, Size,
// Version, ModTime and Mode.
func (s *suite) testOpenAgreesWithStat(t *testing.T) {
	b := s.one(t)
	for i, n := range []int{0, 777, largeSize} {
		name := "agree-" + string(rune('a'+i)) + ".json"
		create(t, b, name, payload(uint64(i), n))
		st := stat(t, b, name)
		_, op := read(t, b, name)
		if op.Name != st.Name || op.Size != st.Size || op.Version != st.Version || !op.ModTime.Equal(st.ModTime) || op.Mode != st.Mode {
			t.Errorf("%q: Open returned %+v, Stat %+v", name, op, st)
		}
		if op.ModTime.IsZero() {
			t.Errorf("Open %q returned a zero ModTime: only List may leave it unsaid", name)
		}
	}
}

// A stream opened before a Replace reads one object whole: the one there
// at the opening, or (where a backend cannot keep it) the new one, never
// the start of one and the end of the other.
func (s *suite) testOpenStreamIsOneObject(t *testing.T) {
	if s.cfg.replaceWaits {
		t.Skip("ReplaceWaitsForReaders: a Replace waits for the open stream")
	}
	bs := s.handles(t, 2)
	const name = "opened.json"
	old, next := payload(1, largeSize), payload(2, largeSize)
	obj := create(t, bs[0], name, old)
	rc, opened, err := bs[1].Open(t.Context(), name)
	if err != nil {
		t.Fatalf("Open %q: %v", name, err)
	}
	defer rc.Close()
	if opened.Version != obj.Version {
		t.Fatalf("Open %q returned Version %q; Create returned %q", name, opened.Version, obj.Version)
	}
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatalf("read the head of %q: %v", name, err)
	}
	replace(t, bs[0], name, obj.Version, next)
	rest, err := io.ReadAll(rc)
	if err != nil {
		// Not a torn object: the contract promises no more of a stream
		// whose object was replaced.
		t.Logf("reading %q after it was replaced failed: %v", name, err)
		return
	}
	got := append(head, rest...)
	if !bytes.Equal(got, old) && !bytes.Equal(got, next) {
		t.Fatalf("a stream of %q opened before a Replace read %s: neither the old object (%s) nor the new (%s)", name, describe(got), describe(old), describe(next))
	}
}

// A name that was never written, was removed, or was renamed away is
// missing: Open and Stat fail with fs.ErrNotExist.
func (s *suite) testMissingIsNotExist(t *testing.T) {
	b := s.one(t)
	for _, name := range []string{"never.json", "removed.json", "moved.json"} {
		switch name {
		case "removed.json":
			create(t, b, name, payload(1, 10))
			if _, err := b.Remove(t.Context(), name); err != nil {
				t.Fatalf("Remove %q: %v", name, err)
			}
		case "moved.json":
			create(t, b, name, payload(2, 10))
			if err := b.Rename(t.Context(), name, "moved-to.json"); err != nil {
				t.Fatalf("Rename %q: %v", name, err)
			}
		}
		requireMissing(t, b, name)
	}
}

// An object's Version stays the same while the object does: across Stat,
// Open, List and another handle, and while other names are written.
func (s *suite) testVersionIsStable(t *testing.T) {
	bs := s.handles(t, 2)
	const name = "stable.json"
	made := create(t, bs[0], name, payload(1, 1000))
	check := func(when string) {
		t.Helper()
		for _, b := range bs {
			if st := stat(t, b, name); st.Version != made.Version {
				t.Fatalf("%s, Stat %q on %s says Version %q; Create returned %q", when, name, b.Locate(""), st.Version, made.Version)
			}
			if _, op := read(t, b, name); op.Version != made.Version {
				t.Fatalf("%s, Open %q on %s says Version %q; Create returned %q", when, name, b.Locate(""), op.Version, made.Version)
			}
			objs, err := b.List(t.Context())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			for _, o := range objs {
				if o.Name == name && o.Version != "" && o.Version != made.Version {
					t.Fatalf("%s, List on %s says %q has Version %q; Create returned %q", when, b.Locate(""), name, o.Version, made.Version)
				}
			}
		}
	}
	check("at once")
	check("read again")
	other := create(t, bs[1], "other.json", payload(2, 1000))
	replace(t, bs[0], "other.json", other.Version, payload(3, 1000))
	if err := bs[1].Rename(t.Context(), "other.json", "other-moved.json"); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if _, err := bs[0].Remove(t.Context(), "other-moved.json"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	check("after other names were written, moved and removed")
}

// What one handle writes, another handle on the same store (another
// process) sees at once: created, replaced, renamed and removed objects.
func (s *suite) testWritesVisibleToOtherHandles(t *testing.T) {
	bs := s.handles(t, 2)
	before := listNames(t, bs[1])
	const name = "shared.json"
	p := payload(1, 3000)
	obj := create(t, bs[0], name, p)
	requireBytes(t, bs[1], name, p)
	requireAdded(t, bs[1], before, name)

	p = payload(2, 3000)
	obj = replace(t, bs[1], name, obj.Version, p)
	if got := requireBytes(t, bs[0], name, p); got.Version != obj.Version {
		t.Fatalf("Replace on one handle returned Version %q, Open on the other says %q", obj.Version, got.Version)
	}

	if err := bs[0].Rename(t.Context(), name, "shared-moved.json"); err != nil {
		t.Fatalf("Rename %q: %v", name, err)
	}
	requireMissing(t, bs[1], name)
	requireBytes(t, bs[1], "shared-moved.json", p)
	requireAdded(t, bs[1], before, "shared-moved.json")

	if _, err := bs[1].Remove(t.Context(), "shared-moved.json"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	requireMissing(t, bs[0], "shared-moved.json")
	requireAdded(t, bs[0], before)
}
