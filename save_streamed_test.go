package checkpoint

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigState is a state large enough (more than 600 KB) that a save, once the
// store has seen one, encodes it into the file as it writes it.
type bigState struct {
	Step int64      `json:"step"`
	Rows []bigRow   `json:"rows"`
	Grid [][]string `json:"grid,omitempty"`
}

type bigRow struct {
	Name  string         `json:"name"`
	Score float64        `json:"score"`
	Inv   map[string]int `json:"inv"`
}

func newBigState(step int64, rows int) bigState {
	s := bigState{Step: step}
	for i := range rows {
		s.Rows = append(s.Rows, bigRow{Name: fmt.Sprintf("row-%d-<%d>", i, step), Score: float64(i) / 7, Inv: map[string]int{"gold": i, "rope": int(step)}})
	}
	s.Grid = [][]string{{strings.Repeat("x", 1000)}}
	return s
}

// TestLargeSavesAreStreamedAndLoadBack checks that after a large state the
// store encodes the next ones as it writes them, in every compression
// (zstd from a state larger than its window), and that each loads back as
// it was saved.
func TestLargeSavesAreStreamedAndLoadBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []Option
		rows int
	}{{"plain", nil, 7000}, {"gzip", []Option{Gzip()}, 7000}, {"zstd", []Option{Zstd()}, 13000}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Open[bigState](t.TempDir(), append(tc.opts, NoSync())...)
			require.NoError(t, err)
			defer s.Close()
			for step := int64(1); step <= 3; step++ {
				_, err := s.Save(ctx, step, newBigState(step, tc.rows))
				require.NoError(t, err)
				require.True(t, s.codec.Streamed(reflect.TypeFor[bigState]()), "after step %d", step)
			}
			for step := int64(1); step <= 3; step++ {
				got, _, err := s.Load(ctx, step)
				require.NoError(t, err)
				require.Equal(t, newBigState(step, tc.rows), got)
			}
		})
	}
}

// TestStreamedSaveThatFailsLeavesTheStoreAsItWas checks a streamed save that
// cannot finish: a state encoding/json refuses (a NaN) and a state larger
// than the store reads. Each is ErrInvalid naming the step's file, leaves
// no file behind, and the checkpoints saved before still load.
func TestStreamedSaveThatFailsLeavesTheStoreAsItWas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open[bigState](dir, NoSync(), WithMaxReadSize(1<<20))
	require.NoError(t, err)
	defer s.Close()
	for step := int64(1); step <= 2; step++ {
		_, err := s.Save(ctx, step, newBigState(step, 7000))
		require.NoError(t, err)
	}
	require.True(t, s.codec.Streamed(reflect.TypeFor[bigState]()))
	before := dirNames(t, dir)

	nan := newBigState(3, 7000)
	nan.Rows[5000].Score = math.NaN()
	_, err = s.Save(ctx, 3, nan)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "json: unsupported value: NaN")
	require.ErrorContains(t, err, "step 3")
	require.Equal(t, before, dirNames(t, dir))

	_, err = s.Save(ctx, 3, newBigState(3, 14000)) // about 1.2 MB
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "step 3")
	require.Equal(t, before, dirNames(t, dir))

	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	require.Equal(t, newBigState(2, 7000), got)
	_, err = s.Save(ctx, 3, newBigState(3, 7000))
	require.NoError(t, err)
}
