package einostore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/einostore"
	"github.com/stretchr/testify/require"
)

// Goroutines of one Store Set and Get one shared ID and one ID each at
// once: every Set succeeds (they wait for each other), and every Get
// returns exactly one of the values Set for its ID, while retention prunes
// the checkpoints that Gets may be reading.
func TestConcurrentSetsAndGetsOfGoroutinesNeverSeeATornOrForeignValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t, checkpoint.KeepLast(1))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Go(func() { errs[w] = hammer(ctx, store, fmt.Sprint("g", w), 10) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, found, err := store.Get(ctx, "shared")
	require.NoError(t, err)
	require.True(t, found)
	i, err := parseValue("shared", got)
	require.NoError(t, err)
	require.Equal(t, 9, i, "the last Set of every goroutine is 9")
}

// Two processes and the test's goroutines do the same on one root.
func TestConcurrentSetsAndGetsOfProcessesNeverSeeATornOrForeignValue(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no child processes here")
	}
	t.Parallel()
	ctx := context.Background()
	store, dir := newStore(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for p := range 2 {
		cmd, _ := child(t, "hammer", dir, "", fmt.Sprint("EINOSTORE_TEST_PROC=", p))
		wg.Go(func() { errs[p] = cmd.Wait() })
	}
	for w := range 2 {
		wg.Go(func() { errs[2+w] = hammer(ctx, store, fmt.Sprint("g", w), 30) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, id := range []string{"own-p0", "own-p1", "own-g0", "own-g1"} {
		got, found, err := store.Get(ctx, id)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, value(id, 29), got)
	}
}

// A Get never returns a value older than one whose Set returned before the
// Get began, even while Sets prune the checkpoint it is reading and an old
// one is kept (step 0, by KeepMultiplesOf).
func TestGetNeverReturnsAValueOlderThanTheLastAcknowledgedBeforeIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := newStore(t, checkpoint.KeepMultiplesOf(1_000_000), checkpoint.NoSync())
	const id = "run"
	require.NoError(t, store.Set(ctx, id, value(id, 0)))
	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var setErr error
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if setErr = store.Set(ctx, id, value(id, i)); setErr != nil {
				return
			}
			acked.Store(int64(i))
		}
	})
	getErrs := make(chan error, 4)
	var gets sync.WaitGroup
	for range 4 {
		gets.Go(func() {
			for range 100 {
				before := acked.Load()
				b, _, err := store.Get(ctx, id)
				if err == nil {
					var i int
					if i, err = parseValue(id, b); err == nil && int64(i) < before {
						err = fmt.Errorf("get returned value %d after %d was acknowledged", i, before)
					}
				}
				if err != nil {
					getErrs <- err
					return
				}
			}
		})
	}
	gets.Wait()
	close(stop)
	wg.Wait()
	close(getErrs)
	require.NoError(t, setErr)
	for err := range getErrs {
		require.NoError(t, err)
	}
	require.Positive(t, acked.Load(), "the Sets ran beside the Gets")
}

// Sets, Gets and Deletes of the same IDs from goroutines and another
// process all succeed, and no Get sees a value that is not its ID's.
func TestConcurrentDeletesBesideSetsAndGets(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no child processes here")
	}
	t.Parallel()
	ctx := context.Background()
	store, dir := newStore(t)
	cmd, _ := child(t, "churn", dir, "")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Go(func() { errs[0] = cmd.Wait() })
	for w := 1; w < len(errs); w++ {
		wg.Go(func() { errs[w] = churn(ctx, store, 40) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// TestFirstCallRacingTheCreationOfItsIDSucceeds: a Set or Get of an ID
// that another Store (another process) creates between the call's look for
// its session.json and its listing of the ID's directory sees the session
// the other made: no spurious ErrCorrupt ("missing session.json"), which
// three processes making their first Sets of the same IDs met often.
func TestFirstCallRacingTheCreationOfItsIDSucceeds(t *testing.T) {
	for _, op := range []string{"set", "get"} {
		t.Run(op, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			b, err := dirstore.Open(dir)
			require.NoError(t, err)
			reached, release := make(chan struct{}), make(chan struct{})
			var once atomic.Bool
			slow, err := einostore.NewOnBackend(backendtest.Inject(b, func(o backendtest.Op) error {
				if o.Kind == backendtest.OpList && once.CompareAndSwap(false, true) {
					close(reached)
					<-release
				}
				return nil
			}))
			require.NoError(t, err)
			defer slow.Close()
			other, err := einostore.New(dir)
			require.NoError(t, err)
			defer other.Close()

			done := make(chan error, 1)
			go func() {
				if op == "set" {
					done <- slow.Set(ctx, "run", []byte("A"))
				} else {
					_, _, err := slow.Get(ctx, "run")
					done <- err
				}
			}()
			<-reached // slow has read no session.json, and not yet listed
			require.NoError(t, other.Set(ctx, "run", []byte("B")))
			close(release)
			require.NoError(t, <-done, "%s racing the creation of the ID by another Store", op)
		})
	}
}
