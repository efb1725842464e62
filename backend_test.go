package checkpoint_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
	"github.com/stretchr/testify/require"
)

// TestSaveOnARemoteBackendAsksNothingBeforeItsWrite: on object storage
// every Stat is a request, and a save that asked before writing (does any
// compression of this step exist? is the newest checkpoint still there?)
// would cost several times the PUT it makes. A writer holds the backend's
// lock, so it trusts what it listed at Open and what it wrote and removed
// since: a plain save is one Create, a save that prunes one Create and one
// Remove, and what it does is what it does on the local directory.
func TestSaveOnARemoteBackendAsksNothingBeforeItsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := newCountingBackend(t, dir)
	s, err := checkpoint.OpenBackend[int](b, checkpoint.NoSync(), checkpoint.KeepLast(2))
	require.NoError(t, err)
	require.Equal(t, 1, b.reset()["List"], "Open lists once")

	_, err = s.Save(ctx, 1, 1)
	require.NoError(t, err)
	calls := b.reset()
	require.Equal(t, 1, calls["Create"])
	require.Zero(t, calls["Stat"], "a save asked before writing: %v", calls)

	_, err = s.Save(ctx, 2, 2)
	require.NoError(t, err)
	b.reset()
	_, err = s.Save(ctx, 3, 3) // prunes step 1
	require.NoError(t, err)
	calls = b.reset()
	require.Equal(t, map[string]int{"Create": 1, "Remove": 1}, calls)

	_, err = s.Save(ctx, 3, 3)
	require.ErrorIs(t, err, checkpoint.ErrExists, "the name is taken")

	infos, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 2)
	require.Equal(t, []int64{2, 3}, []int64{infos[0].Step, infos[1].Step})
	require.NoError(t, s.Close())

	// A new writer sees the same store, and a damaged checkpoint in the
	// way of a save is moved aside as on the local directory.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000004.json"), []byte("{torn"), 0o644))
	b = newCountingBackend(t, dir)
	s, err = checkpoint.OpenBackend[int](b, checkpoint.NoSync(), checkpoint.KeepLast(2))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Save(ctx, 4, 4)
	require.NoError(t, err)
	require.Equal(t, 1, b.reset()["Rename"], "the damaged file was moved aside")
	b.reset()
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, v)
	require.Equal(t, int64(4), info.Step)
	require.Equal(t, map[string]int{"List": 1, "Open": 1}, b.reset(), "Latest lists and reads one object")

	// The rolling file: a replacement, conditional on what this store
	// wrote; another object put there under the writer is ErrConflict,
	// and left as it is.
	rdir := t.TempDir()
	rs, err := checkpoint.OpenBackend[int](newCountingBackend(t, rdir), checkpoint.NoSync(), checkpoint.SaveEvery(10), checkpoint.WithRolling())
	require.NoError(t, err)
	defer rs.Close()
	_, _, err = rs.Tick(ctx, 1, 1)
	require.NoError(t, err)
	_, _, err = rs.Tick(ctx, 2, 2)
	require.NoError(t, err)
	other, err := dirstore.Open(rdir, dirstore.NoSync())
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Replace(ctx, "step_last.json", "", func(w io.Writer) error {
		_, err := w.Write([]byte("another writer's"))
		return err
	})
	require.NoError(t, err)
	_, _, err = rs.Tick(ctx, 3, 3)
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	got, err := os.ReadFile(filepath.Join(rdir, "step_last.json"))
	require.NoError(t, err)
	require.Equal(t, "another writer's", string(got))
	// The failure makes the next replacement unconditional: the writer
	// holds the lock, and has been told.
	_, _, err = rs.Tick(ctx, 4, 4)
	require.NoError(t, err)
}

// TestFirstReplacementAfterOpenIsConditionalOnWhatOpenListed: on a remote
// backend a writer's first write of the rolling file or a side file is
// conditional too, on what it listed at Open: If-None-Match (NoObject)
// where it listed nothing, the listed Version where it listed one. Another
// program's object put there, or rewritten, after Open is ErrConflict and
// left as it is; an object that nobody touched since Open is replaced.
func TestFirstReplacementAfterOpenIsConditionalOnWhatOpenListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for _, name := range []string{"result.json", "kept.json"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(`"before Open"`), 0o644))
	}
	s, err := checkpoint.OpenBackend[int](newCountingBackend(t, dir), checkpoint.NoSync(), checkpoint.SaveEvery(10), checkpoint.WithRolling())
	require.NoError(t, err)
	defer s.Close()
	other, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	defer other.Close()
	foreign := func(w io.Writer) error { _, err := w.Write([]byte(`"another program's"`)); return err }
	_, err = other.Create(ctx, "step_last.json", foreign)
	require.NoError(t, err)
	_, err = other.Replace(ctx, "result.json", "", foreign)
	require.NoError(t, err)

	_, _, err = s.Tick(ctx, 1, 1)
	require.ErrorIs(t, err, checkpoint.ErrConflict, "the rolling file put after Open")
	require.ErrorIs(t, s.WriteJSON(ctx, "result.json", 1), checkpoint.ErrConflict, "a side file rewritten after Open")
	for _, name := range []string{"step_last.json", "result.json"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, `"another program's"`, string(got), name)
	}
	require.NoError(t, s.WriteJSON(ctx, "kept.json", 2), "unchanged since Open")
	require.NoError(t, s.WriteJSON(ctx, "fresh.json", 3), "absent at Open and since")
	var v int
	require.NoError(t, s.ReadJSON(ctx, "kept.json", &v))
	require.Equal(t, 2, v)
}

// Latest on a store with no checkpoint (a fresh start) lists the directory
// at most twice, with or without the rolling file: once for the names it
// walks, once to rule out checkpoints of another layout. What it learns of
// the rolling file's name comes from the first listing.
func TestFreshStartLatestListsAtMostTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, opts := range map[string][]checkpoint.Option{"numbered": nil, "rolling": {checkpoint.SaveEvery(10), checkpoint.WithRolling()}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("a side file"), 0o644))
			b := newCountingBackend(t, dir)
			s, err := checkpoint.OpenBackend[int](b, append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
			require.NoError(t, err)
			defer s.Close()
			b.reset()
			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, checkpoint.ErrNotFound)
			require.LessOrEqual(t, b.reset()["List"], 2, "Lists of a fresh-start Latest")
		})
	}
}

// tracer passes every call to the Backend it embeds and records the
// calls that read (List, Stat, Open), as "List", "Stat name", "Open name".
type tracer struct {
	storage.Backend
	mu    sync.Mutex
	calls []string
}

func (t *tracer) record(call string) {
	t.mu.Lock()
	t.calls = append(t.calls, call)
	t.mu.Unlock()
}

func (t *tracer) take() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.calls
	t.calls = nil
	return c
}

func (t *tracer) List(ctx context.Context) ([]checkpoint.Object, error) {
	t.record("List")
	return t.Backend.List(ctx)
}

func (t *tracer) Stat(ctx context.Context, name string) (checkpoint.Object, error) {
	t.record("Stat " + name)
	return t.Backend.Stat(ctx, name)
}

func (t *tracer) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	t.record("Open " + name)
	return t.Backend.Open(ctx, name)
}

// unwrapping is a tracer that says what it wraps (storage.Wrapper): the
// trivial pass-through wrapper a host writes.
type unwrapping struct{ *tracer }

func (u unwrapping) Unwrap() storage.Backend { return u.Backend }

// describing is a tracer that states the Traits of the directory itself
// (storage.Describer).
type describing struct{ *tracer }

func (describing) Traits() storage.Traits { return storage.Traits{Local: true} }

// A store over a pass-through wrapper of the directory behaves as over the
// directory: it asks the backend's Traits, never its type, so that a
// writer's Open, its first List and Latest take the directory's paths (no
// listing at Open; the header read before the load) and give the same
// answers; a wrapper that says nothing of what it wraps is object storage
// to the store.
func TestStoreOverAWrappedDirectoryBehavesAsOverTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	seed := openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.NoSync())
	for step := int64(1); step <= 3; step++ {
		_, err := seed.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, seed.Close())

	// What the plain directory gives.
	plain := openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.NoSync())
	require.False(t, plain.Remote())
	require.False(t, plain.ListedAtOpen(), "a writer on the directory lists nothing at Open")
	wantList, err := plain.List(ctx)
	require.NoError(t, err)
	wantV, wantInfo, err := plain.Latest(ctx)
	require.NoError(t, err)
	require.NoError(t, plain.Close())

	run := func(wrap func(*tracer) checkpoint.Backend) (s *checkpoint.Store[int], open, first, latest []string) {
		d, err := dirstore.Open(dir, dirstore.NoSync())
		require.NoError(t, err)
		tr := &tracer{Backend: d}
		s, err = checkpoint.OpenBackend[int](wrap(tr), checkpoint.WithLayout("c", 3), checkpoint.NoSync())
		require.NoError(t, err)
		open = tr.take()
		list, err := s.List(ctx)
		require.NoError(t, err)
		require.Equal(t, wantList, list)
		first = tr.take()
		v, info, err := s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, wantV, v)
		require.Equal(t, wantInfo, info)
		latest = tr.take()
		require.NoError(t, s.Close())
		return s, open, first, latest
	}

	s, open, first, latest := run(func(tr *tracer) checkpoint.Backend { return unwrapping{tr} })
	require.False(t, s.Remote(), "a wrapper that unwraps to the directory is Local")
	require.NotContains(t, open, "List", "a writer's Open listed through the wrapper, as on object storage")
	require.Contains(t, first, "List")
	require.True(t, slices.ContainsFunc(first, func(c string) bool { return c == "Open .checkpoint.index" }),
		"the first List read no index ahead, as on object storage: %v", first)

	_, dopen, dfirst, dlatest := run(func(tr *tracer) checkpoint.Backend { return describing{tr} })
	require.ElementsMatch(t, dopen, open, "Open: the wrapper is not the directory")
	require.ElementsMatch(t, dfirst, first, "first List: the wrapper is not the directory")
	require.ElementsMatch(t, dlatest, latest, "Latest: the wrapper is not the directory")

	s, ropen, rfirst, _ := run(func(tr *tracer) checkpoint.Backend { return tr })
	require.True(t, s.Remote(), "a wrapper that says nothing is object storage")
	require.Equal(t, []string{"List"}, ropen, "a writer on object storage lists once at Open")
	require.NotEqual(t, rfirst, first)
}

// A writer's Open asks its backend, through the contract
// (storage.TempCleaner), to remove the temporary files a crashed save left
// behind, and says which final names are the store's: a wrapper that
// passes the request on gets the directory's cleanup, a user's hidden file
// named like a temporary file stays, and a reader asks for nothing.
func TestOpenRemovesStaleTempsThroughTheBackend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stale := []string{".c_001.json.ckpt-tmp-12", ".c_002.json34", ".notes.json.ckpt-tmp-5"}
	kept := []string{".notes.json2", ".session.json.ckpt-tmp-7", ".x.txt.ckpt-tmp-8"}
	for _, n := range append(slices.Clone(stale), kept...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
	open := func(opts ...checkpoint.Option) (asked bool) {
		d, err := dirstore.Open(dir, dirstore.NoSync())
		require.NoError(t, err)
		var mu sync.Mutex
		b := inject.Wrap(d, func(op inject.Op) error {
			mu.Lock()
			defer mu.Unlock()
			asked = asked || op.Kind == inject.RemoveTemps
			return nil
		})
		s, err := checkpoint.OpenBackend[int](b, append([]checkpoint.Option{checkpoint.WithLayout("c", 3), checkpoint.NoSync()}, opts...)...)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		return asked
	}
	require.False(t, open(checkpoint.ReadOnly()), "a reader asked for the removal")
	require.Len(t, dirNames(t, dir), len(stale)+len(kept))
	require.True(t, open(), "a writer's Open did not ask for the removal")
	require.ElementsMatch(t, kept, slices.DeleteFunc(dirNames(t, dir), func(n string) bool { return n == dirstore.LockName }))
}

// writes is a pass-through wrapper (storage.Wrapper) that records the
// names it is asked to write: one that changed the bytes (an encrypting
// wrapper) must see every write.
type writes struct {
	storage.Backend
	mu    sync.Mutex
	names []string
}

func (w *writes) Unwrap() storage.Backend { return w.Backend }

func (w *writes) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (checkpoint.Object, error) {
	w.mu.Lock()
	w.names = append(w.names, "Replace "+name)
	w.mu.Unlock()
	return w.Backend.Replace(ctx, name, ifVersion, write)
}

func (w *writes) Remove(ctx context.Context, names ...string) ([]bool, error) {
	w.mu.Lock()
	for _, name := range names {
		w.names = append(w.names, "Remove "+name)
	}
	w.mu.Unlock()
	return w.Backend.Remove(ctx, names...)
}

// The optional operations that only move or remove what the wrapped
// backend holds are taken from it through Unwrap (storage.As), so that a
// pass-through wrapper of the directory behaves as the directory; the one
// that writes new bytes (storage.Unsynced) never is: the store writes its
// header index through the wrapper's Replace.
func TestWrapperGetsOnlyTheOperationsThatMoveBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
	require.NoError(t, err)
	w := &writes{Backend: d}
	for name, found := range map[string]bool{
		"TempCleaner": func() bool { _, ok := storage.As[storage.TempCleaner](w); return ok }(),
		"Describer":   func() bool { _, ok := storage.As[storage.Describer](w); return ok }(),
		"Linker":      func() bool { _, ok := storage.As[storage.Linker](w); return ok }(),
		"Remover":     func() bool { _, ok := storage.As[storage.ChildRemover](w); return ok }(),
	} {
		require.True(t, found, "%s is not reached through Unwrap", name)
	}
	_, ok := storage.As[storage.Unsynced](&tracer{Backend: d})
	require.False(t, ok, "As unwrapped a wrapper that says nothing of what it wraps")

	s, err := checkpoint.OpenBackend[int](w, checkpoint.WithLayout("c", 3), checkpoint.NoSync(), checkpoint.KeepLast(checkpoint.IndexMinWrite))
	require.NoError(t, err)
	for step := int64(1); step <= checkpoint.IndexMinWrite+1; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close()) // writes the header index
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Contains(t, w.names, "Replace "+checkpoint.IndexName, "the header index was written around the wrapper (the directory's ReplaceUnsynced)")
	require.Contains(t, w.names, "Remove c_001.json", "a pruning removed around the wrapper (the directory's RemoveUnsynced)")
}

// TestOpenThroughAWrapperRemovesStaleTemps: a crash at any instant leaves
// at worst a temporary file that the next Open removes, also when the
// writer opens the directory through a pass-through wrapper (one that says
// what it wraps, as passThrough does) that implements no TempCleaner.
func TestOpenThroughAWrapperRemovesStaleTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, ".step_00000001.json.ckpt-tmp-123")
	require.NoError(t, os.WriteFile(tmp, []byte("x"), 0o644))
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	st, err := checkpoint.OpenBackend[int](passThrough{b}, checkpoint.NoSync())
	require.NoError(t, err)
	defer st.Close()
	_, err = os.Lstat(tmp)
	require.ErrorIs(t, err, os.ErrNotExist, "the writer's Open left the temporary file of a crashed save")
}
