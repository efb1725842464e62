package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// Append takes step 1 in an empty store, and then the step after the
// newest checkpoint of any kind: step, final, error, and the rolling file.
func TestAppendTakesTheStepAfterTheNewestOfAnyKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.SaveEvery(10), checkpoint.WithRolling())
	appendAt := func(want int64, v int) {
		t.Helper()
		info, err := s.Append(ctx, v, checkpoint.WithMeta("by", "append"))
		require.NoError(t, err)
		require.Equal(t, want, info.Step)
		require.Equal(t, checkpoint.KindStep, info.Kind)
		require.Equal(t, "append", info.Meta["by"])
		got, _, err := s.Load(ctx, want)
		require.NoError(t, err)
		require.Equal(t, v, got)
	}
	appendAt(1, 10)
	appendAt(2, 20)
	_, err := s.Save(ctx, 5, 50)
	require.NoError(t, err)
	appendAt(6, 60)
	_, err = s.SaveFinal(ctx, 8, 80)
	require.NoError(t, err)
	appendAt(9, 90)
	_, err = s.SaveError(ctx, 12, 120, errors.New("boom"))
	require.NoError(t, err)
	appendAt(13, 130)
	info, saved, err := s.Tick(ctx, 17, 170) // not due: the rolling file
	require.NoError(t, err)
	require.True(t, saved)
	require.Equal(t, checkpoint.KindRolling, info.Kind)
	appendAt(18, 180)
	_, err = s.Save(ctx, 3, 30) // an older step does not move the newest
	require.NoError(t, err)
	appendAt(19, 190)
}

// A store with only step 0 (a host's initial state) appends at 1.
func TestAppendAfterStepZeroTakesStepOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	_, err := s.Save(ctx, 0, 0)
	require.NoError(t, err)
	info, err := s.Append(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step)
}

// A writer appends after the checkpoints an earlier writer left, the
// rolling file included (its step is in its header).
func TestAppendCountsTheCheckpointsOfAnEarlierWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct {
		save func(s *checkpoint.Store[int]) error
		want int64
	}{
		{func(s *checkpoint.Store[int]) error { _, err := s.Save(ctx, 4, 4); return err }, 5},
		{func(s *checkpoint.Store[int]) error { _, _, err := s.Tick(ctx, 7, 7); return err }, 8},
		{func(s *checkpoint.Store[int]) error { _, err := s.SaveFinal(ctx, 11, 11); return err }, 12},
	} {
		w, err := checkpoint.Open[int](dir, checkpoint.NoSync(), checkpoint.SaveEvery(2), checkpoint.WithRolling())
		require.NoError(t, err)
		require.NoError(t, c.save(w))
		require.NoError(t, w.Close())
		s, err := checkpoint.Open[int](dir, checkpoint.NoSync())
		require.NoError(t, err)
		info, err := s.Append(ctx, int(c.want))
		require.NoError(t, err)
		require.Equal(t, c.want, info.Step)
		require.NoError(t, s.Close())
	}
}

// After Truncate or Delete the writer counts from what is left.
func TestAppendAfterTruncateOrDeleteFollowsWhatIsLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	for i := 1; i <= 5; i++ {
		_, err := s.Append(ctx, i)
		require.NoError(t, err)
	}
	_, err := s.Truncate(ctx, 2)
	require.NoError(t, err)
	info, err := s.Append(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), info.Step)
	require.NoError(t, s.Delete(ctx, 3))
	info, err = s.Append(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), info.Step)
	_, err = s.Truncate(ctx, 0)
	require.NoError(t, err)
	info, err = s.Append(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step, "Truncate(ctx, 0) removes every appended checkpoint")
}

// Concurrent Appends never take one step twice, and an Append and a Save
// of one step never both succeed; each step holds the state of the call
// that succeeded.
func TestConcurrentAppendsAndSavesNeverShareAStep(t *testing.T) {
	t.Parallel()
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			opts := []checkpoint.Option{}
			if async {
				opts = append(opts, checkpoint.Async(3))
			}
			s := openStore[string](t, t.TempDir(), opts...)
			const n = 12
			var mu sync.Mutex
			won := map[int64]string{} // step -> the state of the call that succeeded
			claim := func(step int64, v string) {
				mu.Lock()
				defer mu.Unlock()
				if prev, ok := won[step]; ok {
					t.Errorf("step %d succeeded twice: %s and %s", step, prev, v)
				}
				won[step] = v
			}
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					v := fmt.Sprintf("append %d", i)
					info, err := s.Append(ctx, v)
					// With Async, ErrAsync is another save's failure:
					// this one is queued.
					if err == nil || async && errors.Is(err, checkpoint.ErrAsync) {
						claim(info.Step, v)
					} else {
						t.Errorf("Append: %v", err)
					}
				})
				wg.Go(func() {
					step := int64(i + 1)
					v := fmt.Sprintf("save %d", step)
					if _, err := s.Save(ctx, step, v); err == nil || async && errors.Is(err, checkpoint.ErrAsync) {
						if !async { // a queued save succeeds once published: see below
							claim(step, v)
						}
					} else if !errors.Is(err, checkpoint.ErrExists) {
						t.Errorf("Save %d: %v", step, err)
					}
				})
			}
			wg.Wait()
			err := s.Flush(ctx) // with Async, the saves that lost fail here
			if async {
				if err != nil {
					require.ErrorIs(t, err, checkpoint.ErrAsync)
					require.ErrorIs(t, err, checkpoint.ErrExists)
				}
			} else {
				require.NoError(t, err)
			}
			infos, err := s.List(ctx)
			require.NoError(t, err)
			saves := 0
			for _, info := range infos {
				v, _, err := s.LoadExact(ctx, info)
				require.NoError(t, err)
				if w, ok := won[info.Step]; ok {
					require.Equal(t, w, v, "step %d holds the state of the call that succeeded", info.Step)
				} else {
					require.False(t, !async, "step %d (%s) has no call that succeeded", info.Step, v)
					require.Equal(t, fmt.Sprintf("save %d", info.Step), v)
				}
				if v[:4] == "save" {
					saves++
				}
			}
			require.Len(t, infos, n+saves, "every Append published its own step")
		})
	}
}

// With Async, Append counts the steps queued before it, published or
// not, and Info.Step says the step it queued.
func TestAppendOnAnAsyncStoreCountsQueuedSaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.Async(8))
	_, err := s.Save(ctx, 9, 9)
	require.NoError(t, err)
	info, err := s.Append(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, int64(10), info.Step)
	info, err = s.Append(ctx, 11)
	require.NoError(t, err)
	require.Equal(t, int64(11), info.Step)
	require.NoError(t, s.Flush(ctx))
	v, got, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(11), got.Step)
	require.Equal(t, 11, v)
	_, err = s.Truncate(ctx, 9)
	require.NoError(t, err)
	info, err = s.Append(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, int64(10), info.Step, "after Truncate the async writer lists the store again")
	require.NoError(t, s.Flush(ctx))
}

// An Append that fails names the store (no step was taken) and takes no
// step; a read-only or closed store refuses Append; no step follows the
// largest.
func TestAppendErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[any](t, dir)
	_, err := s.Append(ctx, math.NaN())
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	var e *checkpoint.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "append", e.Op)
	require.False(t, e.HasStep, "no step was taken")
	require.Equal(t, dir, e.Path)
	info, err := s.Append(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step, "a failed Append takes no step")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Append(cctx, 2)
	require.ErrorIs(t, err, context.Canceled)

	r := openStore[any](t, dir, checkpoint.ReadOnly())
	_, err = r.Append(ctx, 2)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)

	_, err = s.Save(ctx, math.MaxInt64, 3)
	require.NoError(t, err)
	_, err = s.Append(ctx, 4)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "no step comes after it")

	require.NoError(t, s.Close())
	_, err = s.Append(ctx, 5)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
}

// removeGate is a backend whose first Remove waits for release after
// saying it began.
type removeGate struct {
	checkpoint.Backend
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *removeGate) Remove(ctx context.Context, names ...string) ([]bool, error) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.Backend.Remove(ctx, names...)
}

// With Async, an Append queued while a Truncate runs keeps its step after
// the Truncate: the next Append takes the step after it, never the same
// one (no state is lost to ErrExists in the background). The worker is
// held in the hook of the first save, and Truncate in its Remove.
func TestAsyncAppendQueuedDuringTruncateNeverSharesAStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	g := &removeGate{Backend: openDirBackend(t, dir), entered: make(chan struct{}), release: make(chan struct{})}
	hookIn := make(chan struct{})
	hookOut := make(chan struct{})
	var hooked sync.Once
	s, err := checkpoint.OpenBackend[int](g, checkpoint.NoSync(), checkpoint.Async(8), checkpoint.WithHooks(checkpoint.Hooks{
		OnSave: func(info checkpoint.Info) {
			hooked.Do(func() { // the first publish holds the worker
				close(hookIn)
				<-hookOut
			})
		},
	}))
	require.NoError(t, err)
	defer s.Close()

	first, err := s.Append(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), first.Step)
	<-hookIn // step 1 is published; the worker is in its hook

	truncated := make(chan error, 1)
	go func() {
		_, err := s.Truncate(ctx, 0) // removes step 1
		truncated <- err
	}()
	<-g.entered // Truncate drained the queue and holds the write lock
	a, err := s.Append(ctx, 100)
	require.NoError(t, err)
	close(g.release)
	require.NoError(t, <-truncated)
	b, err := s.Append(ctx, 200)
	require.NoError(t, err)
	c, err := s.Append(ctx, 300)
	require.NoError(t, err)
	close(hookOut)
	require.NoError(t, s.Flush(ctx), "every queued Append is published (steps %d, %d, %d)", a.Step, b.Step, c.Step)
	require.NotEqual(t, a.Step, b.Step)
	require.NotEqual(t, a.Step, c.Step)
	for _, x := range []checkpoint.Info{a, b, c} {
		v, _, err := s.Load(ctx, x.Step)
		require.NoError(t, err)
		require.Equal(t, map[int64]int{a.Step: 100, b.Step: 200, c.Step: 300}[x.Step], v)
	}
}
