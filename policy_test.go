package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// fakeClock returns times one second apart, so save order is unambiguous.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func TestEverySavesTheMultiplesOfItsInterval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.SaveEvery(5))
	var saved []int64
	for step := int64(1); step <= 16; step++ {
		require.Equal(t, step%5 == 0, s.Due(step))
		info, ok, err := s.Tick(ctx, step, int(step))
		require.NoError(t, err)
		if ok {
			saved = append(saved, info.Step)
			require.Equal(t, checkpoint.KindStep, info.Kind)
		} else {
			require.Zero(t, info)
		}
	}
	require.Equal(t, []int64{5, 10, 15}, saved)
	require.Equal(t, []string{".checkpoint.lock", "turn_005.json", "turn_010.json", "turn_015.json"}, dirNames(t, dir))
}

func TestEveryDefaultSavesEveryStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	for step := int64(1); step <= 3; step++ {
		_, ok, err := s.Tick(ctx, step, 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
}

func TestEveryZeroSavesOnlyFinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.SaveEvery(0))
	for step := int64(0); step <= 10; step++ {
		require.False(t, s.Due(step))
		_, ok, err := s.Tick(ctx, step, 1)
		require.NoError(t, err)
		require.False(t, ok)
	}
	info, err := s.SaveFinal(ctx, 10, 10)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindFinal, info.Kind)
	require.Equal(t, "turn_010.final.json", info.Name())
	require.Equal(t, []string{".checkpoint.lock", "turn_010.final.json"}, dirNames(t, dir))
}

func TestEveryCountsStepZero(t *testing.T) {
	t.Parallel()
	s := openStore[int](t, t.TempDir(), checkpoint.SaveEvery(5))
	require.True(t, s.Due(0), "0 is a multiple of 5: a loop that starts at step 0 saves its initial state")
	require.False(t, s.Due(-5))
	require.False(t, s.Due(4))
}

func TestSaveFinalBesideStepCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.WithLayout("turn", 3), checkpoint.SaveEvery(5), checkpoint.WithClock(newClock().now))
	_, ok, err := s.Tick(ctx, 10, 1)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = s.SaveFinal(ctx, 10, 2)
	require.NoError(t, err, "the final step is saved even when the interval saved it")
	_, err = s.SaveFinal(ctx, 10, 3)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, checkpoint.KindFinal, info.Kind)
}

type agentError struct{ name string }

func (e *agentError) Error() string { return "step " + e.name + " failed" }

func TestSaveErrorRecordsTheErrorChainBesideTheCleanCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	clock := newClock()
	s := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.WithClock(clock.now))
	_, err := s.Save(ctx, 4, sampleState(4))
	require.NoError(t, err)
	clean, err := os.ReadFile(filepath.Join(dir, "turn_004.json"))
	require.NoError(t, err)

	partial := sampleState(4)
	partial.Log = append(partial.Log, "DM: the dragon wakes and—")
	cause := fmt.Errorf("generate reply: %w", errors.Join(&agentError{"dm"}, &fs.PathError{Op: "open", Path: "x", Err: fs.ErrPermission}))
	info, err := s.SaveError(ctx, 4, partial, cause)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, info.Kind)
	require.Equal(t, "turn_004.error.json", info.Name())
	require.NotNil(t, info.Error)
	require.Equal(t, cause.Error(), info.Error.Message)
	require.Equal(t, int64(4), info.Error.Step)
	require.False(t, info.Error.Time.IsZero())
	require.False(t, info.Error.Panic)
	require.Equal(t, []string{"*fmt.wrapError", "*errors.joinError", "*checkpoint_test.agentError", "*fs.PathError", "*errors.errorString"}, info.Error.Types)

	after, err := os.ReadFile(filepath.Join(dir, "turn_004.json"))
	require.NoError(t, err)
	require.Equal(t, clean, after, "the clean checkpoint of the step is untouched")

	// Resume: Latest gives the error checkpoint (written last) with its record.
	got, latest, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, partial, got)
	require.Equal(t, checkpoint.KindError, latest.Kind)
	require.Equal(t, info.Error.Message, latest.Error.Message)
	// Load of the step agrees.
	_, loaded, err := s.Load(ctx, 4)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, loaded.Kind)
	// The clean one is still there for a host that wants it.
	got, cleanInfo, err := s.LatestClean(ctx)
	require.NoError(t, err)
	require.Equal(t, sampleState(4), got)
	require.Equal(t, checkpoint.KindStep, cleanInfo.Kind)

	// A second failure of the same step is kept too, as the next attempt.
	info2, err := s.SaveError(ctx, 4, partial, errors.New("again"))
	require.NoError(t, err)
	require.Equal(t, "turn_004.error-2.json", info2.Name())
	_, latest, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, "again", latest.Error.Message)

	// After the step is redone, the error checkpoints are cleared.
	require.NoError(t, s.ClearError(ctx, 4))
	require.NoError(t, s.ClearError(ctx, 4), "nothing left to clear")
	require.Equal(t, []string{".checkpoint.lock", "turn_004.json"}, dirNames(t, dir))
}

func TestLatestLoadsTheCleanRedoOfAFailedStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.WithClock(newClock().now))
	_, err := s.SaveError(ctx, 5, 1, errors.New("boom"))
	require.NoError(t, err)
	_, err = s.Save(ctx, 5, 2) // the step redone and saved cleanly
	require.NoError(t, err)
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, checkpoint.KindStep, info.Kind)
}

func TestClearErrorIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.NoSync())
	_, err := s.Save(ctx, 5, 5)
	require.NoError(t, err)
	_, err = s.SaveError(ctx, 5, 5, errors.New("boom"))
	require.NoError(t, err)
	require.NoError(t, s.ClearError(ctx, 5))
	require.NoError(t, s.ClearError(ctx, 5), "nothing left to clear is no error")
	require.NoError(t, s.ClearError(ctx, 9), "nor is a step without checkpoints")
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{5}, steps(list))
	require.Equal(t, checkpoint.KindStep, list[0].Kind, "its other checkpoints stay")
}

func TestSaveOnPanicSavesAnErrorCheckpointAndRepanics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3))
	state := sampleState(1)
	var step int64

	run := func() {
		defer s.SaveOnPanic(ctx, func() (int64, gameState) { return step, state })
		for step = 1; step <= 5; step++ {
			state.Turn = step
			state.Log = append(state.Log, fmt.Sprintf("turn %d", step))
			if step == 3 {
				var dice []int
				_ = dice[step] // a real runtime panic
			}
		}
	}
	recovered := func() (r any) {
		defer func() { r = recover() }()
		run()
		return nil
	}()
	require.NotNil(t, recovered, "SaveOnPanic re-panics")
	require.ErrorContains(t, recovered.(error), "index out of range [3]")

	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, info.Kind)
	require.Equal(t, int64(3), info.Step)
	require.Equal(t, int64(3), got.Turn)
	require.True(t, info.Error.Panic)
	require.Contains(t, info.Error.Message, "index out of range [3] with length 0")
	require.Contains(t, info.Error.Stack, "TestSaveOnPanicSavesAnErrorCheckpointAndRepanics")
	require.Equal(t, "runtime.boundsError", info.Error.Types[0])

	// No panic: nothing saved, nothing re-panicked.
	func() {
		defer s.SaveOnPanic(ctx, func() (int64, gameState) { t.Fatal("current called without a panic"); return 0, state })
	}()
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func TestSaveOnPanicRecordsANonErrorValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	func() {
		defer func() { require.Equal(t, "out of dice", recover()) }()
		defer s.SaveOnPanic(ctx, func() (int64, int) { return 9, 99 })
		panic("out of dice")
	}()
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 99, v)
	require.Equal(t, "out of dice", info.Error.Message)
	require.Equal(t, []string{"string"}, info.Error.Types)
}

func TestStoppingSavesIgnoreCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var reported []error
	s := openStore[int](t, t.TempDir(), checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) { reported = append(reported, err) }}))
	_, err := s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, context.Canceled, "an ordinary save honours ctx")
	_, err = s.SaveFinal(ctx, 1, 1)
	require.NoError(t, err)
	_, err = s.SaveError(ctx, 2, 2, ctx.Err())
	require.NoError(t, err)
	func() {
		defer func() { recover() }()
		defer s.SaveOnPanic(ctx, func() (int64, int) { return 3, 3 })
		panic("stop")
	}()
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, steps(list))
	require.Empty(t, reported, "a cancellation is the caller's decision, not a store failure")
}

func TestHooksAndLoggerSeeSavesLoadsPrunesAndFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var (
		mu     sync.Mutex
		events []string
		s      *checkpoint.Store[int]
	)
	record := func(format string, args ...any) {
		mu.Lock()
		events = append(events, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var logs bytes.Buffer
	clock := newClock()
	s = openStore[int](t, dir, checkpoint.WithLayout("b", 2), checkpoint.KeepLast(1), checkpoint.WithClock(clock.now),
		checkpoint.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		checkpoint.WithHooks(checkpoint.Hooks{
			OnSave: func(info checkpoint.Info) {
				// A hook may call the store: it runs outside the store's locks.
				list, err := s.List(ctx)
				require.NoError(t, err)
				record("save %d size=%v listed=%d", info.Step, info.Size > 0, len(list))
			},
			OnLoad:  func(info checkpoint.Info, age time.Duration) { record("load %d age=%s", info.Step, age) },
			OnPrune: func(removed []checkpoint.Info) { record("prune %d", removed[0].Step) },
			OnError: func(err error) { record("error %v", errors.Is(err, checkpoint.ErrExists)) },
		}))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	_, err = s.Save(ctx, 2, 2)
	require.NoError(t, err)
	_, err = s.Save(ctx, 2, 2)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, _, err = s.Latest(ctx) // saved at t+2s, now is t+3s (a failed save reads no clock)
	require.NoError(t, err)
	_, _, err = s.Load(ctx, 7)
	require.ErrorIs(t, err, checkpoint.ErrNotFound) // not an OnError event

	require.Equal(t, []string{"save 1 size=true listed=1", "save 2 size=true listed=1", "prune 1", "error true", "load 2 age=1s"}, events)
	for _, want := range []string{"checkpoint created", "checkpoint restored", "checkpoint pruned", "checkpoint: operation failed"} {
		require.Contains(t, logs.String(), want)
	}
}

func TestHookMayCloseStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var s *checkpoint.Store[int]
	s = openStore[int](t, t.TempDir(), checkpoint.WithHooks(checkpoint.Hooks{OnSave: func(checkpoint.Info) { require.NoError(t, s.Close()) }}))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	_, err = s.Save(ctx, 2, 2)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
}

func TestOnErrorHookMayUseStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var s *checkpoint.Store[int]
	var calls int
	s = openStore[int](t, t.TempDir(), checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) {
		calls++
		if calls > 3 {
			return
		}
		// Each of these would deadlock if the hook ran under the store's locks.
		_, serr := s.Save(ctx, int64(100+calls), 1)
		require.NoError(t, serr)
		_, lerr := s.List(ctx)
		require.NoError(t, lerr)
	}}))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	_, err = s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, _, err = s.Load(ctx, 7)
	require.ErrorIs(t, err, checkpoint.ErrNotFound) // not reported: ErrNotFound
	require.NoError(t, os.WriteFile(filepath.Join(s.Location(), "bad.json"), []byte("{"), 0o644))
	var v int
	require.ErrorIs(t, s.ReadJSON(ctx, "bad.json", &v), checkpoint.ErrCorrupt)
	require.ErrorIs(t, s.WriteJSON(ctx, "x.json", make(chan int)), checkpoint.ErrInvalid)
	require.Equal(t, 3, calls)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 4)
}

func TestOnErrorHookMayCloseStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json"), []byte("{"), 0o644))
	for name, op := range map[string]func(s *checkpoint.Store[int]) error{
		"read json": func(s *checkpoint.Store[int]) error { var v int; return s.ReadJSON(ctx, "bad.json", &v) },
		"load":      func(s *checkpoint.Store[int]) error { _, _, err := s.Load(ctx, 1); return err },
		"latest":    func(s *checkpoint.Store[int]) error { _, _, err := s.Latest(ctx); return err },
	} {
		t.Run(name, func(t *testing.T) {
			var s *checkpoint.Store[int]
			s = openStore[int](t, dir, checkpoint.ReadOnly(), checkpoint.WithHooks(checkpoint.Hooks{OnError: func(error) { require.NoError(t, s.Close()) }}))
			require.ErrorIs(t, op(s), checkpoint.ErrCorrupt) // returns: Close did not wait on this very operation
			_, err := s.List(ctx)
			require.ErrorIs(t, err, checkpoint.ErrClosed)
		})
	}
}

func TestOnPruneAndOnLoadHooksMayWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var s *checkpoint.Store[int]
	var reentered []string
	s = openStore[int](t, t.TempDir(), checkpoint.KeepLast(1), checkpoint.WithHooks(checkpoint.Hooks{
		OnPrune: func(removed []checkpoint.Info) {
			// Would deadlock if OnPrune ran under the write lock.
			require.NoError(t, s.WriteJSON(ctx, "pruned.json", steps(removed)))
			reentered = append(reentered, "prune")
		},
		OnLoad: func(info checkpoint.Info, _ time.Duration) {
			require.NoError(t, s.WriteJSON(ctx, "loaded.json", info.Step))
			reentered = append(reentered, "load")
		},
	}))
	for step := int64(1); step <= 2; step++ {
		_, err := s.Save(ctx, step, 1)
		require.NoError(t, err)
	}
	_, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"prune", "load"}, reentered)
}
