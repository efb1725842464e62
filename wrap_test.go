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
