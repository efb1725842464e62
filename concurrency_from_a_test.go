package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

func TestConcurrentSavesListsAndLoadsKeepEveryStep(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]checkpoint.Option{
		"gzip":       {checkpoint.Gzip()},
		"zstd":       {checkpoint.Zstd()},
		"zstd async": {checkpoint.Zstd(), checkpoint.Async(4)},
	} {
		t.Run(name, func(t *testing.T) { testConcurrentUse(t, opts...) })
	}
}

func TestCloseWaitsForOperationsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := checkpoint.Open[int](dir)
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Save(ctx, int64(i), i)
			results <- err
		}()
	}
	require.NoError(t, s.Close())
	wg.Wait()
	close(results)
	saved := 0
	for err := range results {
		if err == nil {
			saved++
		} else {
			require.ErrorIs(t, err, checkpoint.ErrClosed)
		}
	}
	// Every save that succeeded is whole on disk.
	r := openStore[int](t, dir, checkpoint.ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, saved)
	for _, info := range list {
		_, _, err := r.Load(ctx, info.Step)
		require.NoError(t, err)
	}
}

func TestLoadNeverReturnsAnotherStepOfTheRollingFile(t *testing.T) {
	t.Parallel()
	// The loads hold the rolling file open while the ticks replace it: a
	// volume without NTFS's POSIX rename makes a replacement wait for them
	// (up to 1 s, see retryInUse), and a stream of loads can outlast that.
	skipUnderWine(t, "Wine 8 has no POSIX rename (FileRenameInformationEx): as on a FAT volume, a file that is open cannot be renamed over")
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.Every(0), checkpoint.WithRolling())
	_, _, err := s.Tick(ctx, 1, 1)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for step := int64(2); step <= 400; step++ {
			if _, _, err := s.Tick(ctx, step, int(step)); err != nil {
				panic(err)
			}
		}
	}()
	wrong, loaded := 0, 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		list, err := s.List(ctx)
		require.NoError(t, err)
		if len(list) != 1 {
			continue
		}
		v, info, err := s.Load(ctx, list[0].Step)
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // the rolling file moved on: the honest answer
		}
		require.NoError(t, err)
		loaded++
		if int64(v) != list[0].Step || info.Step != list[0].Step {
			wrong++
		}
	}
	require.Zero(t, wrong, "Load(k) returned another step (%d loads)", loaded)
}

func TestInfoIsACopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	info, err := s.Save(ctx, 1, 1, checkpoint.WithMeta("k", "v"))
	require.NoError(t, err)
	info.Meta["k"] = "mutated by caller"
	_, err = s.SaveError(ctx, 2, 2, fmt.Errorf("x: %w", os.ErrClosed))
	require.NoError(t, err)

	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { // under -race: each caller owns its Info
			defer wg.Done()
			list, err := s.List(ctx)
			if err != nil {
				panic(err)
			}
			list[0].Meta["k"] = fmt.Sprint(i)
			list[1].Error.Types[0] = fmt.Sprint(i)
		}()
	}
	wg.Wait()
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, "v", list[0].Meta["k"])
	require.Equal(t, "*fmt.wrapError", list[1].Error.Types[0])
}

func TestSecondCloseWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// The clock is read inside a save, with the save counted in flight:
	// blocking it holds a save in the middle.
	s, err := checkpoint.Open[int](dir, checkpoint.WithClock(func() time.Time {
		once.Do(func() { close(entered); <-release })
		return time.Now()
	}))
	require.NoError(t, err)
	saved := make(chan error, 1)
	go func() { _, err := s.Save(ctx, 1, 1); saved <- err }()
	<-entered
	first := make(chan error, 1)
	go func() { first <- s.Close() }()
	for !checkpoint.IsClosing(s) { // until the first Close has begun
		runtime.Gosched()
	}
	go func() {
		for i := 0; i < 100; i++ {
			runtime.Gosched()
		}
		close(release)
	}()
	require.NoError(t, s.Close())
	// Whichever Close returned, the lock is free once it has.
	again, err := checkpoint.Open[int](dir)
	require.NoError(t, err, "a Close returned before the store was closed")
	require.NoError(t, again.Close())
	require.NoError(t, <-first)
	require.NoError(t, <-saved)
}

func TestConcurrentSavesOfOneStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Save(ctx, 7, i)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, checkpoint.ErrExists)
		}
	}
	require.Equal(t, 1, ok)
	require.Equal(t, []string{".checkpoint.lock", "step_00000007.json"}, dirNames(t, dir))
}

// testConcurrentUse saves, lists and loads from many goroutines at once
// and checks that every save is whole and every step loads.
func testConcurrentUse(t *testing.T, opts ...checkpoint.Option) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, opts...)
	const writers, perWriter = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter*4)
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				step := int64(w*perWriter + i)
				if _, err := s.Save(ctx, step, sampleState(step)); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, _, err := s.Latest(ctx); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
					errs <- err
				}
				if _, err := s.List(ctx); err != nil {
					errs <- err
				}
				if _, _, err := s.Load(ctx, int64(i)); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, writers*perWriter)
	for i, info := range list {
		require.Equal(t, int64(i), info.Step)
		got, _, err := s.Load(ctx, info.Step)
		require.NoError(t, err)
		require.Equal(t, sampleState(info.Step), got)
	}
}
