package checkpoint_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/stretchr/testify/require"
)

func TestAsyncOptionIsValidated(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1} {
		_, err := checkpoint.Open[int](t.TempDir(), checkpoint.Async(n))
		require.ErrorIs(t, err, checkpoint.ErrInvalid)
	}
}

// TestAsyncSavesPublishInOrder saves numbered and rolling checkpoints
// through a small queue, changing the state right after each call, and
// proves that every checkpoint holds the state as it was when it was saved,
// that save times follow the order of the calls, and that the hooks saw
// every published file.
func TestAsyncSavesPublishInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	published := make(chan checkpoint.Info, 64)
	s := openStore[[]int64](t, t.TempDir(), checkpoint.Async(2), checkpoint.SaveEvery(3), checkpoint.WithRolling(), checkpoint.Zstd(),
		checkpoint.WithHooks(checkpoint.Hooks{OnSave: func(info checkpoint.Info) { published <- info }}))
	state := []int64{0}
	var queued []checkpoint.Info
	for step := int64(1); step <= 40; step++ {
		state[0] = step
		info, saved, err := s.Tick(ctx, step, state)
		require.NoError(t, err)
		require.True(t, saved)
		require.Zero(t, info.Size, "not written yet")
		queued = append(queued, info)
		state[0] = -1 // the host mutates its state at once
	}
	require.NoError(t, s.Flush(ctx))

	for i := 1; i < len(queued); i++ {
		require.True(t, queued[i].Time.After(queued[i-1].Time), "save times follow the calls")
	}
	// The hooks of the last save may still be running when Flush returns.
	for range queued {
		select {
		case info := <-published:
			require.Positive(t, info.Size)
			require.Equal(t, "zstd", info.Compression)
		case <-time.After(time.Minute):
			t.Fatal("OnSave was not called for every save")
		}
	}

	list, err := s.List(ctx)
	require.NoError(t, err)
	var steps []int64
	for _, info := range list {
		got, _, err := s.LoadExact(ctx, info)
		require.NoError(t, err)
		require.Equal(t, []int64{info.Step}, got, "the state as it was when saved")
		require.Equal(t, queued[info.Step-1].Time, info.Time)
		steps = append(steps, info.Step)
	}
	require.Equal(t, []int64{3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 40}, steps)
	_, latest, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindRolling, latest.Kind)
	require.Equal(t, int64(40), latest.Step)
}

// waitFor calls hook-driven tests' blocking points: it fails the test
// rather than hang if ch never delivers.
func waitFor(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal("timed out")
	}
}

// blockFirstSave returns hooks whose OnSave, for step 1 only, signals
// entered and waits for release: the store's goroutine is then stuck in a
// hook and publishes nothing else.
func blockFirstSave() (h checkpoint.Hooks, entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	h.OnSave = func(info checkpoint.Info) {
		if info.Step == 1 && info.Kind == checkpoint.KindStep {
			close(entered)
			<-release
		}
	}
	return h, entered, release
}

func TestAsyncReadsSeePublishedCheckpointsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hooks, entered, release := blockFirstSave()
	s := openStore[int](t, t.TempDir(), checkpoint.Async(4), checkpoint.WithHooks(hooks))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	waitFor(t, entered)
	_, err = s.Save(ctx, 2, 2)
	require.NoError(t, err)

	// Step 2 is queued behind a goroutine that is busy: not there yet.
	_, _, err = s.Load(ctx, 2)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	v, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v)

	// Flush publishes it itself.
	require.NoError(t, s.Flush(ctx))
	v, _, err = s.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	close(release)
}

func TestAsyncOtherWritesPublishQueuedSavesFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hooks, entered, release := blockFirstSave()
	defer close(release)
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.Async(8), checkpoint.WithHooks(hooks))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	waitFor(t, entered)
	for step := int64(2); step <= 4; step++ {
		_, err = s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	// Delete sees the checkpoint saved just before it.
	require.NoError(t, s.Delete(ctx, 2))
	// SaveFinal runs after the queued saves, and is written when it returns.
	final, err := s.SaveFinal(ctx, 4, 4)
	require.NoError(t, err)
	require.Positive(t, final.Size)
	require.NoError(t, s.WriteJSON(ctx, "result.json", map[string]int{"steps": 4}))
	require.Equal(t, []string{".checkpoint.lock", "result.json", "step_00000001.json", "step_00000003.json", "step_00000004.final.json", "step_00000004.json"}, dirNames(t, dir))
	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindFinal, info.Kind, "the final checkpoint was saved last")
}

// TestAsyncQueueIsBounded proves that no more than the queue's length of
// saves wait: with the store's goroutine busy, a Save that finds the queue
// full publishes the waiting saves itself (as one batch) before it queues
// its own.
func TestAsyncQueueIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hooks, entered, release := blockFirstSave()
	defer close(release)
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.Async(2), checkpoint.WithHooks(hooks))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	waitFor(t, entered)
	for step := int64(2); step <= 3; step++ {
		_, err = s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoFileExists(t, filepath.Join(dir, "step_00000002.json"))
	_, err = s.Save(ctx, 4, 4) // the queue is full
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "step_00000002.json"))
	require.FileExists(t, filepath.Join(dir, "step_00000003.json"))
	require.NoFileExists(t, filepath.Join(dir, "step_00000004.json"))
}

// TestAsyncFailureIsReturnedOnceAndReported saves a step twice. The second
// save can only fail in the background; the failure reaches OnError when
// it happens, is returned by the next Save (which queues its own state all
// the same) and by the next Flush or Close, once each.
func TestAsyncFailureIsReturnedOnceAndReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu       sync.Mutex
		reported []error
	)
	failed := make(chan struct{}, 10)
	hooks := checkpoint.Hooks{OnError: func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
		failed <- struct{}{}
	}}
	dir := t.TempDir()
	s, err := checkpoint.Open[int](dir, checkpoint.Async(2), checkpoint.WithHooks(hooks))
	require.NoError(t, err)

	// Flush returns it.
	_, err = s.Save(ctx, 1, 1)
	require.NoError(t, err)
	_, err = s.Save(ctx, 1, 100)
	require.NoError(t, err, "queued: the duplicate is not known yet")
	err = s.Flush(ctx)
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	var e *checkpoint.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "async save", e.Op)
	require.Equal(t, int64(1), e.Step)
	require.Equal(t, filepath.Join(dir, "step_00000001.json"), e.Path)
	require.NoError(t, s.Flush(ctx), "returned once")
	waitFor(t, failed)
	mu.Lock()
	require.Len(t, reported, 1)
	require.ErrorIs(t, reported[0], checkpoint.ErrExists)
	mu.Unlock()
	v, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, v, "the first save stands")

	// The next Save returns it, and queues its own state; Flush returns
	// it again, once.
	_, err = s.Save(ctx, 1, 100)
	require.NoError(t, err)
	waitFor(t, failed)
	info, err := s.Save(ctx, 2, 2)
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorAs(t, err, &e)
	require.Equal(t, int64(1), e.Step)
	require.Equal(t, int64(2), info.Step, "queued")
	err = s.Flush(ctx)
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.ErrorAs(t, err, &e)
	require.Equal(t, int64(1), e.Step)
	require.NoError(t, s.Flush(ctx), "returned once")
	v, _, err = s.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 2, v)

	// Close returns it.
	_, _, err = s.Tick(ctx, 2, 2)
	require.NoError(t, err)
	waitFor(t, failed)
	err = s.Close()
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorAs(t, err, &e)
	require.Equal(t, "async save", e.Op)
	require.Equal(t, int64(2), e.Step)
	mu.Lock()
	require.Len(t, reported, 3)
	mu.Unlock()

	r := openStore[int](t, dir, checkpoint.ReadOnly())
	v, _, err = r.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 2, v)
}

func TestAsyncCloseFlushesAndStopsTheGoroutine(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	before := runtime.NumGoroutine()
	s, err := checkpoint.Open[int](dir, checkpoint.Async(8), checkpoint.Gzip())
	require.NoError(t, err)
	for step := int64(0); step < 20; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second Close returns the first's result")
	_, err = s.Save(ctx, 20, 20)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	require.ErrorIs(t, s.Flush(ctx), checkpoint.ErrClosed)

	r := openStore[int](t, dir, checkpoint.ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 20)
	requireGoroutines(t, before)
}

// requireGoroutines waits until the number of goroutines is back to n: a
// goroutine that has been told to stop may take a moment to return.
func requireGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want %d", runtime.NumGoroutine(), n)
		}
		runtime.Gosched()
	}
}

// TestAsyncHookMayCloseStore closes the store from OnSave, which runs on
// the store's own goroutine: Close publishes what is queued, without
// waiting for the hook that called it.
func TestAsyncHookMayCloseStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	before := runtime.NumGoroutine()
	closed := make(chan error, 1)
	proceed := make(chan struct{})
	var s *checkpoint.Store[int]
	var first atomic.Bool
	s, err := checkpoint.Open[int](dir, checkpoint.Async(4), checkpoint.WithHooks(checkpoint.Hooks{OnSave: func(checkpoint.Info) {
		// Close runs the hooks of the saves it published, which call
		// this hook again.
		if first.CompareAndSwap(false, true) {
			<-proceed
			closed <- s.Close()
		}
	}}))
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	close(proceed)
	require.NoError(t, <-closed)
	_, err = s.Save(ctx, 4, 4)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	r := openStore[int](t, dir, checkpoint.ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	requireGoroutines(t, before)
}

// TestAsyncHookMaySaveOnAFullQueue saves from OnSave while the queue is
// full and the store's goroutine is the one running the hook: the hook's
// Save publishes the oldest queued save itself instead of waiting forever.
func TestAsyncHookMaySaveOnAFullQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	entered, proceed, saved := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var s *checkpoint.Store[int]
	s = openStore[int](t, t.TempDir(), checkpoint.Async(1), checkpoint.WithHooks(checkpoint.Hooks{OnSave: func(info checkpoint.Info) {
		if info.Step == 1 {
			close(entered)
			<-proceed
			_, err := s.Save(ctx, 100, 100)
			require.NoError(t, err)
			close(saved)
		}
	}}))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	waitFor(t, entered)
	_, err = s.Save(ctx, 2, 2) // fills the queue
	require.NoError(t, err)
	close(proceed)
	waitFor(t, saved)
	require.NoError(t, s.Flush(ctx))
	for _, step := range []int64{1, 2, 100} {
		_, _, err := s.Load(ctx, step)
		require.NoError(t, err)
	}
}

func TestAsyncStoreOptionsStillApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.Async(3), checkpoint.KeepLast(2), checkpoint.NoSync())
	for step := int64(1); step <= 10; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{9, 10}, steps(list))

	// Read-only stores refuse saves at once, async or not.
	r := openStore[int](t, dir, checkpoint.ReadOnly(), checkpoint.Async(3))
	_, err = r.Save(ctx, 11, 11)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)
	require.NoError(t, r.Flush(ctx))
}

func TestFlushWithoutAsyncHonoursContextAndClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := checkpoint.Open[int](t.TempDir())
	require.NoError(t, err)
	require.NoError(t, s.Flush(ctx))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.Flush(cctx), context.Canceled)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Flush(ctx), checkpoint.ErrClosed)
}

func TestAsyncDirectoryHasNoLeftovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := checkpoint.Open[int](dir, checkpoint.Async(4), checkpoint.WithRolling(), checkpoint.SaveEvery(5))
	require.NoError(t, err)
	for step := int64(1); step <= 12; step++ {
		_, _, err := s.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{".checkpoint.lock", "step_00000005.json", "step_00000010.json", "step_last.json"}, names)
}

// TestAsyncCloseWaitsForTheHooksOfItsGoroutine calls Close while a hook on
// the store's goroutine is still running; the hook writes a variable,
// without a lock, that the caller reads once Close returns, and then calls
// Close itself. Close must return only after that hook (run with -race,
// the race detector checks the order), without deadlock, and the
// goroutine must be gone.
func TestAsyncCloseWaitsForTheHooksOfItsGoroutine(t *testing.T) {
	// Not parallel: it counts goroutines.
	ctx := context.Background()
	before := runtime.NumGoroutine()
	entered, release := make(chan struct{}), make(chan struct{})
	var written int
	var nested error
	var s *checkpoint.Store[int]
	s = openStore[int](t, t.TempDir(), checkpoint.Async(4), checkpoint.NoSync(), checkpoint.WithHooks(checkpoint.Hooks{OnSave: func(info checkpoint.Info) {
		switch info.Step {
		case 1: // on the store's goroutine
			close(entered)
			<-release
			written = 42
			nested = s.Close()
		case 2: // published by Close, whose hooks run before it returns
			close(release)
		}
	}}))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	waitFor(t, entered)
	_, err = s.Save(ctx, 2, 2)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, 42, written, "Close returned before the hook did")
	require.NoError(t, nested)
	requireGoroutines(t, before)
}

// TestAsyncFailureNeverDropsTheNextSave makes background saves fail (the
// fault seam) and proves the contract of their failures: the next Save
// returns them wrapping ErrAsync, naming the failed steps, and still queues
// its own state; Flush returns them too, although a Save did already, since
// states whose Save returned nil are missing; every other state is
// published.
func TestAsyncFailureNeverDropsTheNextSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	doomed := map[string]bool{"c_002.json": true, "c_004.json": true, "c_005.json": true}
	fault := func(op inject.Op) error {
		if op.Kind == inject.Create && doomed[op.Name] {
			return errFault
		}
		return nil
	}
	failed := make(chan struct{}, 8)
	s := openFaulty[int](t, t.TempDir(), fault, checkpoint.WithLayout("c", 3), checkpoint.Async(4), checkpoint.NoSync(),
		checkpoint.WithHooks(checkpoint.Hooks{OnError: func(error) { failed <- struct{}{} }}))
	for step := int64(1); step <= 2; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	waitFor(t, failed)

	info, err := s.Save(ctx, 3, 3)
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.ErrorIs(t, err, errFault)
	require.True(t, strings.HasPrefix(err.Error(), "checkpoint: background save failed: step 2: "), err.Error())
	require.Equal(t, int64(3), info.Step, "step 3 is queued all the same")
	err = s.Flush(ctx)
	require.ErrorIs(t, err, checkpoint.ErrAsync, "step 2 is missing: Flush must say so")
	require.ErrorIs(t, err, errFault)
	require.ErrorContains(t, err, "step 2: ")
	require.NoError(t, s.Flush(ctx))
	v, _, err := s.Load(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, v)

	for step := int64(4); step <= 6; step++ {
		_, saved, err := s.Tick(ctx, step, int(step))
		if err != nil { // step 4 may have failed already
			require.ErrorIs(t, err, checkpoint.ErrAsync)
		}
		require.True(t, saved, "queued")
	}
	err = s.Flush(ctx)
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.True(t, strings.HasPrefix(err.Error(), "checkpoint: background save failed: steps 4, 5: "), err.Error())
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 3, 6}, steps(list))
}

// TestAsyncFailuresKeptAreBounded makes every background save fail and
// never flushes until the end: the store keeps the first failures and
// counts the others, so that a host saving into a full disk for days does
// not run out of memory, and Flush still says how many failed.
func TestAsyncFailuresKeptAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fault := func(op inject.Op) error {
		if op.Kind == inject.Create {
			return errFault
		}
		return nil
	}
	s := openFaulty[int](t, t.TempDir(), fault, checkpoint.Async(4), checkpoint.NoSync())
	const saves = checkpoint.MaxAsyncFailures + 36
	for step := int64(1); step <= saves; step++ {
		_, err := s.Save(ctx, step, int(step))
		if err != nil {
			require.ErrorIs(t, err, checkpoint.ErrAsync)
		}
	}
	err := s.Flush(ctx)
	require.ErrorIs(t, err, checkpoint.ErrAsync)
	require.ErrorIs(t, err, errFault)
	require.True(t, strings.HasPrefix(err.Error(), "checkpoint: background save failed: steps 1, 2, 3, "), err.Error())
	require.Contains(t, err.Error(), fmt.Sprintf(", %d and 36 more: ", checkpoint.MaxAsyncFailures))
}

// TestAsyncSaveFromOfAQueuedStepIsErrExists proves that SaveFrom on an
// Async store publishes the saves queued before it first: a queued Save of
// the same step wins, SaveFrom is ErrExists without calling its write
// function, and the step loads the queued state.
func TestAsyncSaveFromOfAQueuedStepIsErrExists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[[]byte](t, t.TempDir(), checkpoint.Async(8))
	_, err := s.Save(ctx, 5, []byte("state"))
	require.NoError(t, err)
	called := 0
	_, err = s.SaveFrom(ctx, 5, func(w io.Writer) error { called++; return nil })
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.Zero(t, called)
	got, _, err := s.Load(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, "state", string(got))
}
