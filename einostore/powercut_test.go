package einostore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/einostore"
	"github.com/stretchr/testify/require"
)

// powerCutScenario Sets "run" four times and "done" twice, with KeepLast(2),
// then Deletes "done". It returns, for each ID, the index of the last Set
// that returned nil (-1 if none), and whether the Delete returned nil; it
// stops at the first error, which is the power cut's.
func powerCutScenario(ctx context.Context, m *backendtest.Mem) (acked map[string]int, deleted bool, err error) {
	acked = map[string]int{"run": -1, "done": -1}
	b, err := m.Open()
	if err != nil {
		return acked, false, err
	}
	store, err := einostore.NewOnBackend(b, checkpoint.KeepLast(2))
	if err != nil {
		return acked, false, err
	}
	defer store.Close()
	for i := range 4 {
		for _, id := range []string{"run", "done"} {
			if id == "done" && i >= 2 {
				continue
			}
			if err := store.Set(ctx, id, value(id, i)); err != nil {
				return acked, false, err
			}
			acked[id] = i
		}
	}
	if err := store.Delete(ctx, "done"); err != nil {
		return acked, false, err
	}
	return acked, true, nil
}

// A power cut during any call of a run of Sets and a Delete, on storage
// that keeps exactly what was made durable, everything, or a random part
// of the rest, leaves each ID with its last acknowledged value or a later
// one (or, if no Set of it returned, nothing or one of its values), never
// damage and never an error; a deleted ID stays deleted; every ID takes
// new Sets.
func TestPowerCutAtEveryCallKeepsEveryAcknowledgedSet(t *testing.T) {
	t.Parallel()
	for _, flavour := range []struct {
		name string
		opts []backendtest.MemOption
	}{{"object", nil}, {"local", []backendtest.MemOption{backendtest.MemLocal()}}} {
		t.Run(flavour.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			m := backendtest.NewMem(flavour.opts...)
			_, _, err := powerCutScenario(ctx, m)
			require.NoError(t, err)
			ops := m.Ops()
			require.Greater(t, ops, 10)
			cuts := 0
			for n := 1; n <= ops; n++ {
				m := backendtest.NewMem(flavour.opts...)
				m.CutPowerAt(n)
				acked, deleted, err := powerCutScenario(ctx, m)
				if err != nil {
					// Calls vary a little from run to run (a listing
					// more or less): a cut past the last call is none.
					require.ErrorIs(t, err, backendtest.ErrPowerCut, "cut at %d", n)
					cuts++
				}
				for _, cfg := range []backendtest.CrashCloneConfig{
					{UnsyncedPercent: 0},
					{UnsyncedPercent: 100},
					{UnsyncedPercent: 50, Rand: rand.New(rand.NewPCG(uint64(n), 7))},
				} {
					where := fmt.Sprintf("cut at %d of %d, %d%% unsynced kept", n, ops, cfg.UnsyncedPercent)
					checkAfterCut(t, ctx, m.CrashClone(cfg), acked, deleted, where)
				}
			}
			require.Greater(t, cuts, ops*3/4, "the cuts landed in the scenario")
		})
	}
}

func checkAfterCut(t *testing.T, ctx context.Context, m *backendtest.Mem, acked map[string]int, deleted bool, where string) {
	t.Helper()
	b, err := m.Open()
	require.NoError(t, err, where)
	store, err := einostore.NewOnBackend(b)
	require.NoError(t, err, where)
	defer store.Close()
	for id, last := range acked {
		got, found, err := store.Get(ctx, id)
		require.NoError(t, err, "%s: get %s", where, id)
		switch {
		case id == "done" && deleted:
			require.False(t, found, "%s: %s was deleted", where, id)
		case found:
			i, err := parseValue(id, got)
			require.NoError(t, err, where)
			require.GreaterOrEqual(t, i, last, "%s: %s", where, id)
		default:
			// Nothing: only if no Set of it returned, or a Delete of it
			// had begun.
			require.True(t, last < 0 || id == "done", "%s: %s lost its value %d", where, id, last)
		}
		require.NoError(t, store.Set(ctx, id, value(id, 9)), "%s: set %s", where, id)
		got, _, err = store.Get(ctx, id)
		require.NoError(t, err, where)
		require.Equal(t, value(id, 9), got, where)
	}
}
