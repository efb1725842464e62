package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"

	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/stretchr/testify/require"
)

// Sessions over a wrapper that wraps its child stores too (the fault
// injector) link a fork's checkpoints as over the directory (Linker
// through Unwrap, of the source as well), and remove a failed creation's
// empty directory (ChildRemover).
func TestSessionsOverAWrapperLinkAndRemoveAsTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := checkpoint.OpenDir(dir, checkpoint.NoSync())
	require.NoError(t, err)
	failClaim := false
	var mu sync.Mutex
	r, err := checkpoint.OpenSessionsBackend(inject.Wrap(d, func(op inject.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if failClaim && op.Kind == inject.Create && op.Name == checkpoint.ClaimName {
			return errInjected
		}
		return nil
	}), checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, src.ID)
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
