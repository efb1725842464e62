package checkpoint

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
	"github.com/stretchr/testify/require"
)

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

func (t *tracer) List(ctx context.Context) ([]Object, error) {
	t.record("List")
	return t.Backend.List(ctx)
}

func (t *tracer) Stat(ctx context.Context, name string) (Object, error) {
	t.record("Stat " + name)
	return t.Backend.Stat(ctx, name)
}

func (t *tracer) Open(ctx context.Context, name string) (io.ReadCloser, Object, error) {
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
	seed := openStore[int](t, dir, WithLayout("c", 3), NoSync())
	for step := int64(1); step <= 3; step++ {
		_, err := seed.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, seed.Close())

	// What the plain directory gives.
	plain := openStore[int](t, dir, WithLayout("c", 3), NoSync())
	require.False(t, plain.remote())
	require.Nil(t, plain.listed, "a writer on the directory lists nothing at Open")
	wantList, err := plain.List(ctx)
	require.NoError(t, err)
	wantV, wantInfo, err := plain.Latest(ctx)
	require.NoError(t, err)
	require.NoError(t, plain.Close())

	run := func(wrap func(*tracer) Backend) (s *Store[int], open, first, latest []string) {
		d, err := dirstore.Open(dir, dirstore.NoSync())
		require.NoError(t, err)
		tr := &tracer{Backend: d}
		s, err = OpenBackend[int](wrap(tr), WithLayout("c", 3), NoSync())
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

	s, open, first, latest := run(func(tr *tracer) Backend { return unwrapping{tr} })
	require.False(t, s.remote(), "a wrapper that unwraps to the directory is Local")
	require.NotContains(t, open, "List", "a writer's Open listed through the wrapper, as on object storage")
	require.Contains(t, first, "List")
	require.True(t, slices.ContainsFunc(first, func(c string) bool { return c == "Open .checkpoint.index" }),
		"the first List read no index ahead, as on object storage: %v", first)

	_, dopen, dfirst, dlatest := run(func(tr *tracer) Backend { return describing{tr} })
	require.ElementsMatch(t, dopen, open, "Open: the wrapper is not the directory")
	require.ElementsMatch(t, dfirst, first, "first List: the wrapper is not the directory")
	require.ElementsMatch(t, dlatest, latest, "Latest: the wrapper is not the directory")

	s, ropen, rfirst, _ := run(func(tr *tracer) Backend { return tr })
	require.True(t, s.remote(), "a wrapper that says nothing is object storage")
	require.Equal(t, []string{"List"}, ropen, "a writer on object storage lists once at Open")
	require.NotEqual(t, rfirst, first)
}

// A writer's Open asks its backend, through the contract
// (storage.TempCleaner), to remove the temporary files a crashed save left
// behind, and says which final names are the store's: a wrapper that
// passes the request on gets the directory's cleanup, a user's file of the
// old temporary shape stays, and a reader asks for nothing.
func TestOpenRemovesStaleTempsThroughTheBackend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stale := []string{".c_001.json.ckpt-tmp-12", ".c_002.json34", ".notes.json.ckpt-tmp-5"}
	kept := []string{".notes.json2", ".session.json.ckpt-tmp-7", ".x.txt.ckpt-tmp-8"}
	for _, n := range append(slices.Clone(stale), kept...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
	open := func(opts ...Option) (asked bool) {
		d, err := dirstore.Open(dir, dirstore.NoSync())
		require.NoError(t, err)
		var mu sync.Mutex
		b := inject.Wrap(d, func(op inject.Op) error {
			mu.Lock()
			defer mu.Unlock()
			asked = asked || op.Kind == inject.RemoveTemps
			return nil
		})
		s, err := OpenBackend[int](b, append([]Option{WithLayout("c", 3), NoSync()}, opts...)...)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		return asked
	}
	require.False(t, open(ReadOnly()), "a reader asked for the removal")
	require.Len(t, dirNames(t, dir), len(stale)+len(kept))
	require.True(t, open(), "a writer's Open did not ask for the removal")
	require.ElementsMatch(t, kept, slices.DeleteFunc(dirNames(t, dir), func(n string) bool { return n == lockName }))
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

func (w *writes) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (Object, error) {
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
	d, err := OpenDir(t.TempDir(), NoSync())
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

	s, err := OpenBackend[int](w, WithLayout("c", 3), NoSync(), KeepLast(indexMinWrite))
	require.NoError(t, err)
	for step := int64(1); step <= indexMinWrite+1; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close()) // writes the header index
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Contains(t, w.names, "Replace "+indexName, "the header index was written around the wrapper (the directory's ReplaceUnsynced)")
	require.Contains(t, w.names, "Remove c_001.json", "a pruning removed around the wrapper (the directory's RemoveUnsynced)")
}

// Sessions over a wrapper that wraps its child stores too (the fault
// injector) link a fork's checkpoints as over the directory (Linker
// through Unwrap, of the source as well), and remove a failed creation's
// empty directory (ChildRemover).
func TestSessionsOverAWrapperLinkAndRemoveAsTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := OpenDir(dir, NoSync())
	require.NoError(t, err)
	failClaim := false
	var mu sync.Mutex
	r, err := OpenSessionsBackend(inject.Wrap(d, func(op inject.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if failClaim && op.Kind == inject.Create && op.Name == claimName {
			return errInjected
		}
		return nil
	}), NoSync())
	require.NoError(t, err)
	defer r.Close()
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := OpenSessionStore[int](r, src.ID)
	require.NoError(t, err)
	info, err := st.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	f, err := r.Fork(ctx, src.ID, 1, nil)
	require.NoError(t, err)
	a, err := os.Stat(info.Path)
	require.NoError(t, err)
	b, err := os.Stat(filepath.Join(f.Dir, filepath.Base(info.Path)))
	require.NoError(t, err)
	require.True(t, os.SameFile(a, b), "the fork copied the checkpoint instead of linking it")

	mu.Lock()
	failClaim = true
	mu.Unlock()
	_, err = r.Create(ctx, "run", nil)
	require.ErrorIs(t, err, errInjected)
	require.NoDirExists(t, filepath.Join(dir, "run"), "a failed creation left its directory")
}
