package checkpoint_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/stretchr/testify/require"
)

func TestRoundTripNestedState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		opts []checkpoint.Option
		comp format.Compression
	}{
		{"plain", nil, format.CompressNone},
		{"gzip", []checkpoint.Option{checkpoint.Gzip()}, format.CompressGzip},
		{"zstd", []checkpoint.Option{checkpoint.Zstd()}, format.CompressZstd},
		{"nosync", []checkpoint.Option{checkpoint.NoSync()}, format.CompressNone},
		{"zstd nosync", []checkpoint.Option{checkpoint.Zstd(), checkpoint.NoSync()}, format.CompressZstd},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore[gameState](t, t.TempDir(), tt.opts...)
			want := sampleState(7)
			human := "Ana"
			want.Human = &human
			saved, err := s.Save(ctx, 7, want, checkpoint.WithMeta("player", "Ana"), checkpoint.WithMeta("scene", "tavern"))
			require.NoError(t, err)
			require.Equal(t, int64(7), saved.Step)
			require.Equal(t, checkpoint.KindStep, saved.Kind)
			require.Equal(t, tt.comp.String(), saved.Compression)
			require.Equal(t, "step_00000007"+tt.comp.Ext(), saved.Name())
			require.Equal(t, 2, saved.Format)
			require.Equal(t, map[string]string{"player": "Ana", "scene": "tavern"}, saved.Meta)
			fi, err := os.Stat(saved.Path)
			require.NoError(t, err)
			require.Equal(t, fi.Size(), saved.Size)
			raw, err := os.ReadFile(saved.Path)
			require.NoError(t, err)
			require.Equal(t, tt.comp, format.Sniff(raw))

			got, info, err := s.Load(ctx, 7)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, saved, info)
		})
	}
}

func TestOldCheckpointsUnchangedByLaterSaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3))
	_, err := s.Save(ctx, 1, sampleState(1))
	require.NoError(t, err)
	first, err := os.ReadFile(filepath.Join(dir, "turn_001.json"))
	require.NoError(t, err)
	fi1, err := os.Stat(filepath.Join(dir, "turn_001.json"))
	require.NoError(t, err)
	for turn := int64(2); turn <= 10; turn++ {
		_, err := s.Save(ctx, turn, sampleState(turn))
		require.NoError(t, err)
	}
	after, err := os.ReadFile(filepath.Join(dir, "turn_001.json"))
	require.NoError(t, err)
	require.Equal(t, first, after)
	fi2, err := os.Stat(filepath.Join(dir, "turn_001.json"))
	require.NoError(t, err)
	require.True(t, os.SameFile(fi1, fi2), "the file was replaced")
	require.Equal(t, fi1.ModTime(), fi2.ModTime())
}

func TestSaveExistingStepFailsAndKeepsFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, gzSecond := range []bool{false, true} {
		t.Run(fmt.Sprintf("second gzip=%v", gzSecond), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[gameState](t, dir)
			info, err := s.Save(ctx, 3, sampleState(3))
			require.NoError(t, err)
			before, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			if gzSecond {
				require.NoError(t, s.Close())
				s = openStore[gameState](t, dir, checkpoint.Gzip())
			}
			_, err = s.Save(ctx, 3, sampleState(99))
			require.ErrorIs(t, err, checkpoint.ErrExists)
			require.Contains(t, err.Error(), "save step 3")
			after, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			require.Equal(t, before, after)
			require.Equal(t, []string{".checkpoint.lock", "step_00000003.json"}, dirNames(t, dir))
			got, _, err := s.Load(ctx, 3)
			require.NoError(t, err)
			require.Equal(t, int64(3), got.Turn)
		})
	}
}

func TestUnencodableStateLeavesNoFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[any](t, dir)
	for name, state := range map[string]any{
		"channel": make(chan int),
		"NaN":     math.NaN(),
		"func":    func() {},
	} {
		_, err := s.Save(ctx, 1, state)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, name)
		require.Contains(t, err.Error(), "save step 1", name)
	}
	require.Equal(t, []string{".checkpoint.lock"}, dirNames(t, dir))
	// (A nil state saves as null and loads back as nil: nilstate_test.go.)
	_, err := s.Save(ctx, -1, 1)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = s.Save(ctx, 1, 1, checkpoint.WithMeta("", "x"))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.Equal(t, []string{".checkpoint.lock"}, dirNames(t, dir))
}

// saveOnMarshal is a state whose encoding uses the store.
type saveOnMarshal struct{ s *checkpoint.Store[any] }

func (m saveOnMarshal) MarshalJSON() ([]byte, error) {
	if _, err := m.s.Save(context.Background(), 99, 99); err != nil {
		return nil, err
	}
	return []byte(`"encoded"`), nil
}

func TestStateEncodingRunsOutsideTheWriteLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[any](t, t.TempDir())
	_, err := s.Save(ctx, 1, saveOnMarshal{s})
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 99}, steps(list))
}

func TestSaveErrorsNameTheFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[any](t, dir, checkpoint.WithLayout("turn", 3))
	path := filepath.Join(dir, "turn_001.json")
	_, err := s.Save(ctx, 1, make(chan int))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "checkpoint: save step 1 "+path+": invalid argument: encode state")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Save(cancelled, 1, 1)
	require.ErrorContains(t, err, "save step 1 "+path)
	require.NoError(t, s.Close())
	_, err = s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	require.ErrorContains(t, err, "save step 1 "+path)
}

// TestSaveDoesNotCopyTheEncodedState proves that, once the store's buffers
// and compressors are warm, a save allocates far less than its state: the
// encoded state lives in a reused buffer and is hashed and written (or
// compressed) where it lies.
func TestSaveDoesNotCopyTheEncodedState(t *testing.T) {
	if checkpoint.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	ctx := context.Background()
	state := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	for name, opts := range map[string][]checkpoint.Option{"plain": {checkpoint.NoSync()}, "gzip": {checkpoint.NoSync(), checkpoint.Gzip()}, "zstd": {checkpoint.NoSync(), checkpoint.Zstd()}} {
		t.Run(name, func(t *testing.T) {
			s := openStore[string](t, t.TempDir(), opts...)
			step := int64(0)
			save := func() {
				_, err := s.Save(ctx, step, state)
				require.NoError(t, err)
				step++
			}
			// A collection would empty the buffer pools (as it should,
			// when the store is idle): keep it from running.
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			save() // warm the buffers and the compressor
			const saves = 30
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; i < saves; i++ {
				save()
			}
			runtime.ReadMemStats(&after)
			perSave := (after.TotalAlloc - before.TotalAlloc) / saves
			t.Logf("%d bytes allocated per save of a %d-byte state", perSave, len(state))
			// One copy of the state would be 1 MiB per save. (A pool
			// keeps a buffer per processor, so a save that moves to
			// another one may still grow a fresh buffer, once.)
			require.Less(t, perSave, uint64(len(state)/2))
		})
	}
}

// A writer with a retention rule stops looking for its steps in the
// compressions its directory holds none of, once a prune has read the whole
// directory: a step saved in another compression before it opened, or seen
// by a List since, still blocks a save of that step.
func TestSaveAfterAScanStillSeesOtherCompressions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	gz := openStore[gameState](t, dir, checkpoint.Gzip())
	_, err := gz.Save(ctx, 5, sampleState(5))
	require.NoError(t, err)
	require.NoError(t, gz.Close())

	plain := openStore[gameState](t, dir, checkpoint.KeepLast(10))
	_, err = plain.Save(ctx, 1, sampleState(1)) // its prune reads the directory
	require.NoError(t, err)
	_, err = plain.Save(ctx, 5, sampleState(5))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, err = plain.Save(ctx, 6, sampleState(6))
	require.NoError(t, err)

	// A store that found none: a zstd file of a step it has not saved,
	// seen by a List, blocks that step too.
	dir2 := t.TempDir()
	w := openStore[gameState](t, dir2, checkpoint.KeepLast(10))
	_, err = w.Save(ctx, 1, sampleState(1))
	require.NoError(t, err)
	zs := openStore[gameState](t, t.TempDir(), checkpoint.Zstd())
	info, err := zs.Save(ctx, 2, sampleState(2))
	require.NoError(t, err)
	raw, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir2, info.Name()), raw, 0o644))
	list, err := w.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	_, err = w.Save(ctx, 2, sampleState(2))
	require.ErrorIs(t, err, checkpoint.ErrExists)
}

func TestRollingFileHoldsTheLastStepBetweenNumberedSaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			dir := t.TempDir()
			opts := []checkpoint.Option{checkpoint.WithLayout("turn", 3), checkpoint.SaveEvery(5), checkpoint.WithRolling()}
			ext := ".json"
			if gz {
				opts = append(opts, checkpoint.Gzip())
				ext += ".gz"
			}
			rolling := "turn_last" + ext
			s := openStore[int](t, dir, opts...)
			for step := int64(1); step <= 13; step++ {
				info, ok, err := s.Tick(ctx, step, int(step))
				require.NoError(t, err)
				require.True(t, ok)
				if step%5 == 0 {
					require.Equal(t, checkpoint.KindStep, info.Kind)
				} else {
					require.Equal(t, checkpoint.KindRolling, info.Kind)
					require.Equal(t, rolling, info.Name())
				}
				// A crash now would lose no step: Latest is this one.
				v, latest, err := s.Latest(ctx)
				require.NoError(t, err)
				require.Equal(t, int(step), v)
				require.Equal(t, step, latest.Step)
			}
			require.Equal(t, []string{".checkpoint.lock", "turn_005" + ext, "turn_010" + ext, rolling}, dirNames(t, dir))
			list, err := s.List(ctx)
			require.NoError(t, err)
			require.Len(t, list, 3)
			require.Equal(t, checkpoint.KindRolling, list[2].Kind)
			require.Equal(t, int64(13), list[2].Step)
			v, _, err := s.Load(ctx, 13)
			require.NoError(t, err)
			require.Equal(t, 13, v)

			// A due step makes the numbered checkpoint the newest again.
			_, _, err = s.Tick(ctx, 15, 15)
			require.NoError(t, err)
			_, info, err := s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(15), info.Step)
			require.Equal(t, checkpoint.KindStep, info.Kind)
		})
	}
}

func TestRollingFileFollowsTheStoresCompression(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.SaveEvery(0), checkpoint.WithRolling())
	_, _, err := s.Tick(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = openStore[int](t, dir, checkpoint.SaveEvery(0), checkpoint.WithRolling(), checkpoint.Gzip())
	_, _, err = s.Tick(ctx, 2, 2)
	require.NoError(t, err)
	require.Equal(t, []string{".checkpoint.lock", "step_last.json.gz"}, dirNames(t, dir))
	v, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.NoError(t, s.Close())
	s = openStore[int](t, dir, checkpoint.SaveEvery(0), checkpoint.WithRolling(), checkpoint.Zstd())
	_, _, err = s.Tick(ctx, 3, 3)
	require.NoError(t, err)
	require.Equal(t, []string{".checkpoint.lock", "step_last.json.zst"}, dirNames(t, dir))
	v, _, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

func TestSideFilesRoundTripAndAreNoCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	type result struct {
		Stories int      `json:"stories"`
		Done    []string `json:"done"`
	}
	require.NoError(t, s.WriteJSON(ctx, "result.json", result{Stories: 2, Done: []string{"a"}}))
	require.NoError(t, s.WriteJSON(ctx, "result.json", result{Stories: 2, Done: []string{"a", "b"}}))
	var got result
	require.NoError(t, s.ReadJSON(ctx, "result.json", &got))
	require.Equal(t, result{Stories: 2, Done: []string{"a", "b"}}, got)
	require.Equal(t, []string{".checkpoint.lock", "result.json"}, dirNames(t, dir))

	// Side files are not checkpoints.
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list)

	require.ErrorIs(t, s.ReadJSON(ctx, "missing.json", &got), checkpoint.ErrNotFound)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o644))
	require.ErrorIs(t, s.ReadJSON(ctx, "bad.json", &got), checkpoint.ErrCorrupt)
	require.ErrorIs(t, s.WriteJSON(ctx, "x.json", make(chan int)), checkpoint.ErrInvalid)

	r := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
	require.ErrorIs(t, r.WriteJSON(ctx, "result.json", 1), checkpoint.ErrReadOnly)
	require.NoError(t, r.ReadJSON(ctx, "result.json", &got))
}

// A save of a negative step is ErrInvalid, saying steps are 0 or more,
// and names no file a step of -1 would have.
func TestSaveOfNegativeStepNamesNoImpossibleFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	_, err := s.Save(context.Background(), -1, 1)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.Equal(t, "checkpoint: save step -1 "+dir+": invalid argument: negative step -1: steps are 0 or more", err.Error())
	require.NotContains(t, err.Error(), "-1.json")
}

// TestRollingSaveWorksAfterTheStoreRemovedItsRollingFile: the rolling file
// is replaced on the condition that it is still what the store last wrote;
// after the store's own Delete or Truncate removed it, the condition is that
// nothing is there, and the next Tick saves.
func TestRollingSaveWorksAfterTheStoreRemovedItsRollingFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, remove := range []string{"truncate", "delete"} {
		t.Run(remove, func(t *testing.T) {
			s := openStore[int](t, t.TempDir(), checkpoint.WithRolling(), checkpoint.SaveEvery(10))
			_, _, err := s.Tick(ctx, 0, 0) // a numbered checkpoint
			require.NoError(t, err)
			_, _, err = s.Tick(ctx, 3, 3) // the rolling file
			require.NoError(t, err)
			if remove == "truncate" {
				removed, err := s.Truncate(ctx, 0)
				require.NoError(t, err)
				require.Len(t, removed, 1)
			} else {
				require.NoError(t, s.Delete(ctx, 3))
			}
			_, _, err = s.Tick(ctx, 1, 1)
			require.NoError(t, err, "the first rolling save after the store removed its rolling file")
			_, _, err = s.Tick(ctx, 2, 2)
			require.NoError(t, err)
			_, info, err := s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2), info.Step)
		})
	}
}
