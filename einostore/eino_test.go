package einostore_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/cloudwego/eino/compose"
	"github.com/gocheckpoint/checkpoint/einostore"
	"github.com/stretchr/testify/require"
)

// Store implements Eino's interface.
var _ compose.CheckPointStore = (*einostore.Store)(nil)

// An Eino run interrupted in one process, which is then killed with
// kill -9, is resumed from the store by a new process and finishes with
// the result of the whole run, its first nodes not run again.
func TestEinoRunResumesInANewProcessAfterKill9(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("kill -9 is Unix's")
	}
	t.Parallel()
	dir := t.TempDir()
	const id = "run/7 ünïcode"

	cmd, out := child(t, "interrupt", dir, id)
	require.Equal(t, "interrupted", readLine(t, out))
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	cmd, out = child(t, "resume", dir, id)
	require.Equal(t, "result start-a-b-c", readLine(t, out))
	require.NoError(t, cmd.Wait())
}

// In one process: the interrupt Sets a checkpoint that Get returns, and a
// second Invoke with the same ID resumes from it.
func TestEinoRunResumesFromTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t)
	r, err := compileGraph(ctx, store, false)
	require.NoError(t, err)

	_, found, err := store.Get(ctx, "run-1")
	require.NoError(t, err)
	require.False(t, found)

	_, err = r.Invoke(ctx, "start", compose.WithCheckPointID("run-1"))
	info, ok := compose.ExtractInterruptInfo(err)
	require.True(t, ok, "want an interrupt, got %v", err)
	require.Equal(t, []string{"c"}, info.BeforeNodes)
	cp, found, err := store.Get(ctx, "run-1")
	require.NoError(t, err)
	require.True(t, found)
	require.NotEmpty(t, cp)

	r, err = compileGraph(ctx, store, true)
	require.NoError(t, err)
	got, err := r.Invoke(ctx, "ignored", compose.WithCheckPointID("run-1"))
	require.NoError(t, err)
	require.Equal(t, "start-a-b-c", got)
}
