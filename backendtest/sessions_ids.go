package backendtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/names"
)

// hostileSessionIDs are session IDs that no file system or object store
// takes as a name as they are, and IDs that equal names the engine uses
// or that other IDs map to (see checkpoint.ValidSessionID). Pairs differ
// only in case. None is all digits, so that numbering starts at 001.
func hostileSessionIDs() []string {
	return []string{
		"user:42/thread#7", "6f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f",
		"Ünïcode", "ÜNÏCODE", "日本語/スレッド", "🙂",
		"..", ".", "a/b", `a\b`, "../../etc/passwd", "/abs",
		"CON", "con", "nul", "NUL.txt", "COM1", "lpt9", "trail.", "trail ", " lead",
		"with space", "a b", "A B", "100%", "%41%2F", "~user", "$HOME", `*?<>|"`, "\t\n", "\x00", "-rf",
		".hidden", ".staging-x", ".sessions.lock", ".session.claim", "session.json", ".checkpoint.store",
		strings.Repeat("é", 256), // 512 bytes
		strings.Repeat("x", 65), strings.Repeat("x", 1024), strings.Repeat("X", 1024),
		names.Mapped("a b"), names.Mapped("A B") + " ", strings.ToUpper(names.Mapped("a b")),
	}
}

// testBackendAnyStringIsASessionID creates, reads, opens, writes and
// forks sessions of hostile IDs: each is listed and returned exactly as
// given, to this worker and another, and each is stored under its own
// name, which no other ID's equals even in another case.
func testBackendAnyStringIsASessionID(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	ids := hostileSessionIDs()
	for i, id := range ids {
		s, err := r.Create(ctx, id, map[string]string{"id": id})
		req.NoError(t, err, "%q", id)
		req.NoError(t, s.Err, "%q", id)
		req.Equal(t, id, s.ID)
		_, err = r.Create(ctx, id, nil)
		req.ErrorIs(t, err, checkpoint.ErrExists, "%q", id)

		st, err := checkpoint.OpenSessionStore[int](r, id)
		req.NoError(t, err, "%q", id)
		for step := int64(1); step <= 2; step++ {
			_, err := st.Save(ctx, step, i*10+int(step))
			req.NoError(t, err, "%q", id)
		}
		req.NoError(t, st.Close())
		req.NoError(t, r.SetMeta(ctx, id, map[string]string{"id": id, "n": "2"}), "%q", id)

		g, err := r.Get(ctx, id)
		req.NoError(t, err, "%q", id)
		req.Equal(t, id, g.ID)
		req.Equal(t, map[string]string{"id": id, "n": "2"}, g.Meta)
		req.Equal(t, 2, g.Checkpoints, "%q", id)
		req.Equal(t, int64(2), g.LastStep, "%q", id)
	}

	want := slices.Sorted(slices.Values(ids))
	req.Equal(t, want, listedIDs(t, r), "List returns the IDs as given")
	req.Equal(t, want, listedIDs(t, w.open(t)), "and so does it to another worker")

	// Every ID has a name of its own, in any case, that the engine uses
	// for nothing else.
	root := w.root(t, false)
	t.Cleanup(func() { root.Close() })
	children, err := root.Children(ctx)
	req.NoError(t, err)
	req.Len(t, children, len(ids), "one child store per session")
	folded := map[string]string{}
	for _, id := range ids {
		name := names.SessionName(id)
		req.Contains(t, children, name, "%q", id)
		req.False(t, strings.HasPrefix(name, "."), "%q is stored under a hidden name %q", id, name)
		req.False(t, len(name) > 97, "%q is stored under a name %d bytes long", id, len(name))
		if other, ok := folded[strings.ToLower(name)]; ok {
			t.Fatalf("%q and %q are stored under names that differ only in case", id, other)
		}
		folded[strings.ToLower(name)] = id
	}

	// Fork takes the next number, whatever IDs the root holds, and records
	// its parent as given.
	for i, from := range ids {
		f, err := r.Fork(ctx, from, 1, map[string]string{"forked": "yes"})
		req.NoError(t, err, "%q", from)
		req.Equal(t, fmt.Sprintf("%03d", i+1), f.ID, "numbering ignores mapped names")
		req.Equal(t, from, f.Parent)
		req.Equal(t, int64(1), f.ParentStep)
		st, err := checkpoint.OpenSessionStore[int](r, f.ID)
		req.NoError(t, err)
		v, info, err := st.Latest(ctx)
		req.NoError(t, err)
		req.Equal(t, int64(1), info.Step)
		req.Equal(t, i*10+1, v, "the fork of %q holds its checkpoint", from)
		req.NoError(t, st.Close())
		got, err := r.Get(ctx, f.ID)
		req.NoError(t, err)
		req.Equal(t, from, got.Parent)
	}
	n, err := r.New(ctx, nil)
	req.NoError(t, err)
	req.Equal(t, fmt.Sprintf("%03d", len(ids)+1), n.ID)

	// The most recently active session resumes under its ID.
	last := "Ünïcode"
	req.NoError(t, r.SetMeta(ctx, last, nil))
	st, s, err := checkpoint.ResumeLatestSession[int](ctx, w.open(t))
	req.NoError(t, err)
	req.Equal(t, last, s.ID)
	req.NoError(t, st.Close())
}

// testBackendMappedNameIsCheckedAgainstItsID copies a session stored under
// a mapped name to the name of another ID (as a hand might, or as a hash
// collision would look): the copy is a damaged session, never the other
// ID's or the original's, and no session is made over it.
func testBackendMappedNameIsCheckedAgainstItsID(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	_, err := r.Create(ctx, "a b", nil)
	req.NoError(t, err)
	playSession(t, r, "a b", 1)
	src := w.child(t, names.SessionName("a b"))
	rc, _, err := src.Open(ctx, "session.json")
	req.NoError(t, err)
	meta, err := io.ReadAll(rc)
	rc.Close()
	req.NoError(t, err)

	copied := w.child(t, names.SessionName("c d"))
	_, err = copied.Create(ctx, "session.json", func(wr io.Writer) error {
		_, err := wr.Write(meta)
		return err
	})
	req.NoError(t, err)

	list, err := r.List(ctx)
	req.NoError(t, err)
	req.Len(t, list, 2, "the copy is listed, damaged, and hides nothing")
	for _, s := range list {
		if s.ID == "a b" {
			req.NoError(t, s.Err)
			continue
		}
		req.Equal(t, "", s.ID, "a copy's ID is unknown")
		req.ErrorIs(t, s.Err, checkpoint.ErrCorrupt)
		req.Equal(t, copied.Locate(""), s.Dir)
	}
	_, err = r.Get(ctx, "c d")
	req.ErrorIs(t, err, checkpoint.ErrCorrupt)
	_, err = checkpoint.OpenSessionStore[int](r, "c d")
	req.ErrorIs(t, err, checkpoint.ErrCorrupt)
	req.ErrorIs(t, r.SetMeta(ctx, "c d", nil), checkpoint.ErrCorrupt)
	_, err = r.Fork(ctx, "c d", 1, nil)
	req.ErrorIs(t, err, checkpoint.ErrCorrupt)
	_, err = r.Create(ctx, "c d", nil)
	req.ErrorIs(t, err, checkpoint.ErrExists)
	g, err := r.Get(ctx, "a b")
	req.NoError(t, err)
	req.Equal(t, 1, g.Checkpoints)
}

// testBackendEarlierReleasesSessionOfAWindowsNameOpens opens a session an
// earlier release stored under its own name, "con", which new sessions of
// such IDs are not (Windows takes it for a device): it is listed, read,
// opened and written under its ID, and Create of the ID is ErrExists; so
// is one of them that is damaged.
func testBackendEarlierReleasesSessionOfAWindowsNameOpens(t *testing.T, w workers) {
	ctx := context.Background()
	created := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	meta, err := json.Marshal(map[string]any{"format": 1, "id": "con", "created": created, "updated": created})
	req.NoError(t, err)
	legacy := w.child(t, "con")
	_, err = legacy.Create(ctx, "session.json", func(wr io.Writer) error {
		_, err := wr.Write(meta)
		return err
	})
	if err != nil && runtime.GOOS == "windows" {
		// A Windows directory cannot hold a child named con, so no
		// earlier release wrote such a session there.
		t.Skipf("this storage cannot hold a child named con here: %v", err)
	}
	req.NoError(t, err)

	r := w.open(t)
	req.Equal(t, []string{"con"}, listedIDs(t, r))
	g, err := r.Get(ctx, "con")
	req.NoError(t, err)
	req.Equal(t, legacy.Locate(""), g.Dir)
	playSession(t, r, "con", 2)
	req.NoError(t, r.SetMeta(ctx, "con", map[string]string{"k": "v"}))
	_, err = r.Create(ctx, "con", nil)
	req.ErrorIs(t, err, checkpoint.ErrExists)
	g, err = r.Get(ctx, "con")
	req.NoError(t, err)
	req.Equal(t, 2, g.Checkpoints)
	req.Equal(t, map[string]string{"k": "v"}, g.Meta)
	req.Equal(t, []string{"session.json", "turn_001.json", "turn_002.json"}, objectNames(t, legacy, false))

	// A damaged one (checkpoints, no session.json) stays its ID's.
	damaged := w.child(t, "nul")
	_, err = damaged.Create(ctx, "turn_001.json", func(wr io.Writer) error {
		_, err := io.WriteString(wr, "{")
		return err
	})
	req.NoError(t, err)
	_, err = r.Get(ctx, "nul")
	req.ErrorIs(t, err, checkpoint.ErrCorrupt)
	_, err = r.Create(ctx, "nul", nil)
	req.ErrorIs(t, err, checkpoint.ErrExists)
	list, err := r.List(ctx)
	req.NoError(t, err)
	req.Len(t, list, 2)
	for _, s := range list {
		if s.ID == "nul" {
			req.ErrorIs(t, s.Err, checkpoint.ErrCorrupt)
		} else {
			req.Equal(t, "con", s.ID)
		}
	}
}
