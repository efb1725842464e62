package einostore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/einostore"
	"github.com/stretchr/testify/require"
)

func TestGetOfAnIDNeverSetIsNotFound(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	b, found, err := store.Get(context.Background(), "never")
	require.NoError(t, err)
	require.False(t, found)
	require.Nil(t, b)
}

func TestGetReturnsTheLastSetOfEachID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t)
	big := bytes.Repeat([]byte{0, 1, 2, '"', '}', '\n', 0xff}, 1<<20/7)
	for i, id := range []string{"a", "b", "user:42/thread#7", "..", "CON"} {
		require.NoError(t, store.Set(ctx, id, []byte("first")))
		want := append([]byte(id), big[:i*1000]...)
		require.NoError(t, store.Set(ctx, id, want))
		got, found, err := store.Get(ctx, id)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, want, got)
	}
	require.NoError(t, store.Set(ctx, "big", big))
	got, found, err := store.Get(ctx, "big")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, big, got)
}

func TestSetRefusesBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t)
	for _, c := range []struct {
		id   string
		data []byte
	}{
		{"run", nil},
		{"run", []byte{}},
		{"", []byte("x")},
		{"bad\xff", []byte("x")},
		{string(make([]byte, 1025)), []byte("x")},
	} {
		err := store.Set(ctx, c.id, c.data)
		require.ErrorIs(t, err, checkpoint.ErrInvalid)
		require.ErrorContains(t, err, "einostore: set checkpoint")
	}
	_, _, err := store.Get(ctx, "")
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorIs(t, store.Delete(ctx, ""), checkpoint.ErrInvalid)
	ids, err := store.Sessions().List(ctx)
	require.NoError(t, err)
	require.Empty(t, ids)
}

func TestRetentionKeepsEachIDsHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t, checkpoint.KeepLast(2))
	for i := range 5 {
		require.NoError(t, store.Set(ctx, "a", value("a", i)))
		require.NoError(t, store.Set(ctx, "b", value("b", i)))
	}
	require.NoError(t, store.Set(ctx, "c", value("c", 0)))
	for _, c := range []struct {
		id          string
		checkpoints int
		last        int
	}{{"a", 2, 4}, {"b", 2, 4}, {"c", 1, 0}} {
		s, err := store.Sessions().Get(ctx, c.id)
		require.NoError(t, err)
		require.Equal(t, c.checkpoints, s.Checkpoints, c.id)
		got, _, err := store.Get(ctx, c.id)
		require.NoError(t, err)
		require.Equal(t, value(c.id, c.last), got)
	}
}

// damage flips a byte in the middle of each of the ID's checkpoint files
// chosen by pick (given the files in ascending order).
func damage(t *testing.T, store *einostore.Store, id string, pick func(i, n int) bool) {
	t.Helper()
	s, err := store.Sessions().Get(context.Background(), id)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(s.Dir, "step_*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for i, f := range files {
		if !pick(i, len(files)) {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		b[len(b)/2] ^= 0x20
		require.NoError(t, os.WriteFile(f, b, 0o644))
	}
}

func TestGetFallsBackPastADamagedCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t)
	for i := range 3 {
		require.NoError(t, store.Set(ctx, "run", value("run", i)))
	}
	damage(t, store, "run", func(i, n int) bool { return i == n-1 })
	got, found, err := store.Get(ctx, "run")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, value("run", 1), got)

	// A Set after the damage is the newest again.
	require.NoError(t, store.Set(ctx, "run", value("run", 3)))
	got, _, err = store.Get(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, value("run", 3), got)
}

// If every checkpoint of an ID is damaged, Get is an error, never "not
// found", which would make Eino start the run again from scratch.
func TestGetOfAnIDWhoseCheckpointsAreAllDamagedIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t)
	for i := range 2 {
		require.NoError(t, store.Set(ctx, "run", value("run", i)))
	}
	damage(t, store, "run", func(int, int) bool { return true })
	b, found, err := store.Get(ctx, "run")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, `einostore: get checkpoint "run"`)
	require.False(t, found)
	require.Nil(t, b)
}

func TestDeleteRemovesAnIDAndItMayBeSetAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t)
	require.NoError(t, store.Delete(ctx, "run"), "deleting an ID never set")
	require.NoError(t, store.Set(ctx, "run", value("run", 0)))
	require.NoError(t, store.Set(ctx, "other", value("other", 0)))
	require.NoError(t, store.Delete(ctx, "run"))
	_, found, err := store.Get(ctx, "run")
	require.NoError(t, err)
	require.False(t, found)
	got, _, err := store.Get(ctx, "other")
	require.NoError(t, err)
	require.Equal(t, value("other", 0), got)

	require.NoError(t, store.Set(ctx, "run", value("run", 5)))
	got, _, err = store.Get(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, value("run", 5), got)
}

func TestCallsAfterCloseAreErrClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := einostore.New(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, store.Set(ctx, "run", []byte("x")))
	require.NoError(t, store.Close())
	require.NoError(t, store.Close())
	require.ErrorIs(t, store.Set(ctx, "run", []byte("y")), checkpoint.ErrClosed)
	_, _, err = store.Get(ctx, "run")
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	require.ErrorIs(t, store.Delete(ctx, "run"), checkpoint.ErrClosed)
}

// A Set while another writer (here a store opened directly on the ID's
// session, as another process would hold it) holds the ID waits for it:
// until its context's deadline, then ErrLocked; without a deadline, until
// the writer closes.
func TestSetWaitsForTheIDsWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, dir := newStore(t)
	require.NoError(t, store.Set(ctx, "run", value("run", 0)))

	root, err := checkpoint.OpenSessions(dir)
	require.NoError(t, err)
	defer root.Close()
	holder, err := checkpoint.OpenSessionStore[[]byte](root, "run")
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	err = store.Set(short, "run", value("run", 1))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.ErrorContains(t, err, `einostore: set checkpoint "run"`)

	done := make(chan error, 1)
	go func() { done <- store.Set(ctx, "run", value("run", 2)) }()
	require.NoError(t, holder.Close())
	require.NoError(t, <-done)
	got, _, err := store.Get(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, value("run", 2), got)
}

func TestNewOnBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := dirstore.Open(t.TempDir())
	require.NoError(t, err)
	store, err := einostore.NewOnBackend(b, checkpoint.Zstd())
	require.NoError(t, err)
	require.NoError(t, store.Set(ctx, "run", value("run", 1)))
	got, found, err := store.Get(ctx, "run")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, value("run", 1), got)
	require.NoError(t, store.Close())
}

// Close does not wait for a Set waiting for another writer's lock: the Set
// fails with ErrClosed, whichever of the two comes first.
func TestCloseStopsASetWaitingForTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := einostore.New(dir)
	require.NoError(t, err)
	require.NoError(t, store.Set(ctx, "run", value("run", 0)))
	root, err := checkpoint.OpenSessions(dir)
	require.NoError(t, err)
	defer root.Close()
	holder, err := checkpoint.OpenSessionStore[[]byte](root, "run")
	require.NoError(t, err)
	defer holder.Close()

	done := make(chan error, 1)
	go func() { done <- store.Set(ctx, "run", value("run", 1)) }()
	require.NoError(t, store.Close())
	require.ErrorIs(t, <-done, checkpoint.ErrClosed)
}

func TestAReadOnlyRootGetsAndRefusesSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, dir := newStore(t)
	require.NoError(t, store.Set(ctx, "run", value("run", 0)))

	ro, err := einostore.New(dir, checkpoint.ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	got, found, err := ro.Get(ctx, "run")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, value("run", 0), got)
	_, found, err = ro.Get(ctx, "other")
	require.NoError(t, err)
	require.False(t, found)
	require.ErrorIs(t, ro.Set(ctx, "run", value("run", 1)), checkpoint.ErrReadOnly)
	require.ErrorIs(t, ro.Set(ctx, "new", value("new", 1)), checkpoint.ErrReadOnly)
}

// A Delete that a crash interrupted after it hid the ID (its session.json
// replaced by Delete's tombstone, as checkpoint.Sessions.Delete documents)
// leaves an ID that Get reports as not found, and whose removal the next
// Set (or Delete) finishes before starting it afresh.
func TestAnInterruptedDeleteIsFinishedByTheNextSetOrDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t)
	interrupt := func() {
		t.Helper()
		s, err := store.Sessions().Get(ctx, "run")
		require.NoError(t, err)
		tomb := `{"format":0,"id":"run","abandoned":"deleted","time":"2026-11-26T23:00:00Z"}` + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "session.json"), []byte(tomb), 0o644))
		_, found, err := store.Get(ctx, "run")
		require.NoError(t, err)
		require.False(t, found)
	}
	require.NoError(t, store.Set(ctx, "run", value("run", 0)))
	require.NoError(t, store.Set(ctx, "run", value("run", 1)))
	interrupt()
	require.NoError(t, store.Set(ctx, "run", value("run", 2)))
	got, _, err := store.Get(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, value("run", 2), got)
	s, err := store.Sessions().Get(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, 1, s.Checkpoints, "the deleted run's checkpoints are gone")

	interrupt()
	require.NoError(t, store.Delete(ctx, "run"))
	_, err = store.Sessions().Get(ctx, "run")
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}

// A checkpoint over the read limit is refused (no Get could read it), and
// so is a Set whose context is done; neither leaves anything to Get.
func TestSetRefusesWhatCouldNotBeReadBackAndACancelledContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t, checkpoint.WithMaxReadSize(1024))
	err := store.Set(ctx, "run", make([]byte, 2048))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, `einostore: set checkpoint "run"`)
	_, found, err := store.Get(ctx, "run")
	require.NoError(t, err)
	require.False(t, found)

	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, store.Set(done, "other", []byte("x")), context.Canceled)
	_, found, err = store.Get(ctx, "other")
	require.NoError(t, err)
	require.False(t, found)

	require.NoError(t, store.Set(ctx, "run", make([]byte, 1024)))
	got, found, err := store.Get(ctx, "run")
	require.NoError(t, err)
	require.True(t, found)
	require.Len(t, got, 1024)
}

// TestIDsDifferingOnlyInCaseNeverShareCheckpoints: on a case-insensitive
// file system (macOS, Windows) "Run" and "run" would share a directory; Get
// of "run" never returns the checkpoint of "Run" (the test shows the
// directory under the other case, as such a file system would, by renaming
// it).
func TestIDsDifferingOnlyInCaseNeverShareCheckpoints(t *testing.T) {
	ctx := context.Background()
	store, dir := newStore(t)
	require.NoError(t, store.Set(ctx, "Run", []byte("the checkpoint of Run")))
	// What a case-insensitive file system shows when "run" is looked up.
	require.NoError(t, os.Rename(filepath.Join(dir, "Run"), filepath.Join(dir, "run")))
	got, found, err := store.Get(ctx, "run")
	if err == nil && found {
		require.NotEqual(t, "the checkpoint of Run", string(got), "Get of \"run\" returned the checkpoint of another ID, \"Run\"")
	}
}
