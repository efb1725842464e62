package checkpoint

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrentSaveLoadListPrune runs savers, loaders, listers and a pruner
// against one store at once (run it with -race). Every operation must
// succeed or fail only as the race allows (a pruned step is ErrNotFound),
// and at the end the store holds exactly what the retention rules keep.
func TestConcurrentSaveLoadListPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	const (
		savers   = 4
		perSaver = 40
		keepLast = 5
		every    = 10
	)
	s := openStore[crashState](t, dir, WithLayout("c", 4), KeepLast(keepLast), KeepEvery(every), Gzip())
	var saving sync.WaitGroup
	var done atomic.Bool
	var maxSaved atomic.Int64
	for i := range savers {
		saving.Go(func() {
			for n := range perSaver {
				step := int64(1 + i + n*savers)
				_, err := s.Save(ctx, step, crashState{Step: step, Pad: "x"})
				if err != nil {
					t.Errorf("save %d: %v", step, err)
					return
				}
				for {
					m := maxSaved.Load()
					if step <= m || maxSaved.CompareAndSwap(m, step) {
						break
					}
				}
			}
		})
	}
	var others sync.WaitGroup
	for i := range 3 {
		others.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for !done.Load() {
				step := int64(rng.IntN(savers*perSaver) + 1)
				got, info, err := s.Load(ctx, step)
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("load %d: %v", step, err)
					return
				}
				if err == nil && (got.Step != step || info.Step != step) {
					t.Errorf("load %d returned step %d (%d)", step, got.Step, info.Step)
					return
				}
				got, info, err = s.Latest(ctx)
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("latest: %v", err)
					return
				}
				if err == nil && got.Step != info.Step {
					t.Errorf("latest: state of step %d in checkpoint %d", got.Step, info.Step)
					return
				}
			}
		})
	}
	others.Go(func() {
		for !done.Load() {
			list, err := s.List(ctx)
			if err != nil {
				t.Errorf("list: %v", err)
				return
			}
			if !slices.IsSortedFunc(list, func(a, b Info) int { return int(a.Step - b.Step) }) {
				t.Errorf("list is not sorted: %v", steps(list))
				return
			}
			if _, err := s.Prune(ctx); err != nil {
				t.Errorf("prune: %v", err)
				return
			}
			if _, err := s.PruneDryRun(ctx); err != nil {
				t.Errorf("prune dry run: %v", err)
				return
			}
		}
	})
	saving.Wait()
	done.Store(true)
	others.Wait()

	_, err := s.Prune(ctx)
	require.NoError(t, err)
	total := int64(savers * perSaver)
	var want []int64
	for step := int64(1); step <= total; step++ {
		if step%every == 0 || step > total-keepLast {
			want = append(want, step)
		}
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, want, steps(list), "exactly what the rules keep")
	for _, info := range list {
		got, _, err := s.LoadInfo(ctx, info)
		require.NoError(t, err)
		require.Equal(t, info.Step, got.Step)
	}
	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, total, info.Step)
	require.Equal(t, total, maxSaved.Load())
}
