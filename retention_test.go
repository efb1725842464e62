package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/stretchr/testify/require"
)

func TestKeepLastPrunesAfterSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("beat", 3), checkpoint.KeepLast(3), checkpoint.Gzip())
	for step := int64(1); step <= 10; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	_, err := s.SaveFinal(ctx, 2, 2)
	require.NoError(t, err)
	_, err = s.Save(ctx, 11, 11)
	require.NoError(t, err)
	// Saved last, the error checkpoint is superseded by no clean one.
	_, err = s.SaveError(ctx, 1, 1, errors.New("x"))
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 9, 10, 11}, steps(list), "final and error checkpoints are kept")
	require.Equal(t, []checkpoint.Kind{checkpoint.KindError, checkpoint.KindFinal, checkpoint.KindStep, checkpoint.KindStep, checkpoint.KindStep}, []checkpoint.Kind{list[0].Kind, list[1].Kind, list[2].Kind, list[3].Kind, list[4].Kind})
}

func TestPruneNeverRemovesNewestLoadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("beat", 3))
	for step := int64(1); step <= 5; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	// The two newest are damaged, but their headers still read, so they
	// count toward KeepLast(2); step 3 is the newest that loads.
	for _, name := range []string{"beat_004.json", "beat_005.json"} {
		b, err := os.ReadFile(dir + "/" + name)
		require.NoError(t, err)
		b[len(b)-5] ^= 1
		require.NoError(t, os.WriteFile(dir+"/"+name, b, 0o644))
	}
	s = openStore[int](t, dir, checkpoint.WithLayout("beat", 3), checkpoint.KeepLast(2))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, steps(removed))
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.Equal(t, int64(3), info.Step)
}

func TestPruneWithoutRuleRemovesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	for step := int64(1); step <= 5; step++ {
		_, err := s.Save(ctx, step, 1)
		require.NoError(t, err)
	}
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 5)
}

func TestPruneSkipsUnreadableHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("beat", 3))
	for step := int64(1); step <= 4; step++ {
		_, err := s.Save(ctx, step, 1)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(dir+"/beat_001.json", []byte("garbage"), 0o644))
	s = openStore[int](t, dir, checkpoint.WithLayout("beat", 3), checkpoint.KeepLast(1))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, steps(removed), "a file that does not parse is neither counted nor removed")
	require.FileExists(t, dir+"/beat_001.json")
}

// twelveSteps saves steps 1 to 12, twenty minutes apart from 09:20 UTC, and
// returns the directory and the time of step 12.
func twelveSteps(t *testing.T) (string, time.Time) {
	t.Helper()
	dir := t.TempDir()
	clock := &manualClock{}
	base := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.WithClock(clock.now))
	for step := int64(1); step <= 12; step++ {
		clock.set(base.Add(time.Duration(step) * 20 * time.Minute))
		_, err := s.Save(context.Background(), step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	return dir, base.Add(12 * 20 * time.Minute)
}

func TestRetentionRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rules []checkpoint.Option
		keep  []int64
	}{
		{"no rule keeps everything", nil, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{"KeepLast", []checkpoint.Option{checkpoint.KeepLast(3)}, []int64{10, 11, 12}},
		{"KeepEvery", []checkpoint.Option{checkpoint.KeepMultiplesOf(4)}, []int64{4, 8, 12}},
		{"KeepEvery spares the newest", []checkpoint.Option{checkpoint.KeepMultiplesOf(5)}, []int64{5, 10, 12}},
		{"KeepWithin", []checkpoint.Option{checkpoint.KeepWithin(30 * time.Minute)}, []int64{11, 12}},
		{"KeepOnePer hour", []checkpoint.Option{checkpoint.KeepOnePer(time.Hour)}, []int64{2, 5, 8, 11, 12}},
		{"KeepLast or KeepEvery", []checkpoint.Option{checkpoint.KeepLast(2), checkpoint.KeepMultiplesOf(5)}, []int64{5, 10, 11, 12}},
		{"three rules", []checkpoint.Option{checkpoint.KeepLast(1), checkpoint.KeepOnePer(time.Hour), checkpoint.KeepWithin(50 * time.Minute)}, []int64{2, 5, 8, 10, 11, 12}},
		{"KeepLast larger than the store", []checkpoint.Option{checkpoint.KeepLast(50)}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir, last := twelveSteps(t)
			clock := &manualClock{t: last.Add(time.Minute)}
			opts := append([]checkpoint.Option{checkpoint.WithLayout("turn", 3), checkpoint.WithClock(clock.now)}, tc.rules...)

			// The dry run, on a reader, says what Prune then removes.
			r := openStore[int](t, dir, append(opts, checkpoint.ReadOnly())...)
			planned, err := r.PruneDryRun(ctx)
			require.NoError(t, err)
			require.Len(t, dirNames(t, dir), 13, "a dry run removes nothing (12 checkpoints and the lock)")

			s := openStore[int](t, dir, opts...)
			removed, err := s.Prune(ctx)
			require.NoError(t, err)
			require.Equal(t, steps(planned), steps(removed))
			list, err := s.List(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.keep, steps(list))
			require.Len(t, removed, 12-len(tc.keep))
			for _, info := range removed {
				require.NoFileExists(t, info.Path)
			}
		})
	}
}

func TestRulesApplyAfterEachSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.KeepLast(1), checkpoint.KeepMultiplesOf(3))
	for step := int64(1); step <= 10; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 6, 9, 10}, steps(list))
}

func TestRulesNeverRemoveNewestLoadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("beat", 3))
	for step := int64(1); step <= 7; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	// Step 7's state is damaged but its header reads: no rule keeps it, so
	// it goes, and step 6, the newest that loads, is spared.
	b, err := os.ReadFile(dir + "/beat_007.json")
	require.NoError(t, err)
	b[len(b)-5] ^= 1
	require.NoError(t, os.WriteFile(dir+"/beat_007.json", b, 0o644))

	s = openStore[int](t, dir, checkpoint.WithLayout("beat", 3), checkpoint.KeepMultiplesOf(5))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 7}, steps(removed))
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, v)
	require.Equal(t, int64(6), info.Step)
}

// A checkpoint larger than the store reads (WithMaxReadSize) is intact as
// far as Prune knows: Prune does not remove it on that guess, and spares
// the newest checkpoint that does load too.
func TestPruneKeepsACheckpointLargerThanTheStoreReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[string](t, dir, checkpoint.NoSync())
	for step := int64(1); step <= 4; step++ {
		_, err := s.Save(ctx, step, "small")
		require.NoError(t, err)
	}
	big, err := s.Save(ctx, 5, strings.Repeat("y", 100<<10))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	before, err := os.ReadFile(big.Path)
	require.NoError(t, err)

	// Step 5 is intact, only larger than this store reads: it may not be
	// removed on that guess, and step 4, the newest that loads here, is
	// spared too.
	s = openStore[string](t, dir, checkpoint.NoSync(), checkpoint.KeepMultiplesOf(100), checkpoint.WithMaxReadSize(64<<10))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, steps(removed))
	after, err := os.ReadFile(big.Path)
	require.NoError(t, err)
	require.Equal(t, before, after, "step 5 is untouched")
	require.NoFileExists(t, big.Path+checkpoint.QuarantineSuffix, "and not moved aside")
	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), info.Step)
}

func TestFinalAndErrorCheckpointsKeptUnlessPruneKinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fill := func(s *checkpoint.Store[int]) {
		for step := int64(1); step <= 6; step++ {
			_, err := s.Save(ctx, step, int(step))
			require.NoError(t, err)
			if step == 3 {
				_, err = s.SaveFinal(ctx, step, int(step))
				require.NoError(t, err)
			}
		}
		// Saved last, so that no clean checkpoint supersedes it.
		_, err := s.SaveError(ctx, 2, 2, errors.New("boom"))
		require.NoError(t, err)
	}
	kinds := func(list []checkpoint.Info) []string {
		var out []string
		for _, i := range list {
			out = append(out, fmt.Sprintf("%d%s", i.Step, string(i.Kind)[:1]))
		}
		return out
	}

	s := openStore[int](t, t.TempDir(), checkpoint.KeepLast(2))
	fill(s)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"2e", "3f", "5s", "6s"}, kinds(list))

	s = openStore[int](t, t.TempDir(), checkpoint.KeepLast(2), checkpoint.PruneKinds(checkpoint.KindFinal))
	fill(s)
	list, err = s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"2e", "5s", "6s"}, kinds(list), "a final checkpoint counts and goes; the error one stays")

	s = openStore[int](t, t.TempDir(), checkpoint.KeepLast(3), checkpoint.PruneKinds(checkpoint.KindFinal, checkpoint.KindError))
	fill(s)
	list, err = s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"4s", "5s", "6s"}, kinds(list))
}

func TestRetentionOptionsAreValidated(t *testing.T) {
	t.Parallel()
	for _, opt := range []checkpoint.Option{checkpoint.KeepLast(-1), checkpoint.KeepMultiplesOf(-2), checkpoint.KeepWithin(-time.Second), checkpoint.KeepOnePer(-time.Hour), checkpoint.PruneKinds(checkpoint.KindRolling), checkpoint.PruneKinds("weekly")} {
		_, err := checkpoint.Open[int](t.TempDir(), opt)
		require.ErrorIs(t, err, checkpoint.ErrInvalid)
	}
}

func TestPruneDryRunWithoutRuleIsEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	plan, err := s.PruneDryRun(ctx)
	require.NoError(t, err)
	require.Empty(t, plan)
}

func TestTruncateRemovesLaterStepsNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(2))
	for step := int64(1); step <= 9; step++ {
		_, _, err := s.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	_, err := s.SaveFinal(ctx, 9, 9)
	require.NoError(t, err)
	// Saved last, so that no clean checkpoint supersedes it.
	_, err = s.SaveError(ctx, 7, 7, errors.New("boom"))
	require.NoError(t, err)

	removed, err := s.Truncate(ctx, 5)
	require.NoError(t, err)
	var got []string
	for _, info := range removed {
		got = append(got, filepath.Base(info.Path))
	}
	require.Equal(t, []string{"turn_009.final.json", "turn_last.json", "turn_008.json", "turn_007.error.json", "turn_006.json"}, got, "newest first")
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 4}, steps(list))

	// History can now be rewritten.
	_, err = s.Save(ctx, 6, 60)
	require.NoError(t, err)
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 60, v)
	require.Equal(t, int64(6), info.Step)

	removed, err = s.Truncate(ctx, 6)
	require.NoError(t, err)
	require.Empty(t, removed, "nothing after the step is not an error")
}

func TestTruncateKeepsRollingFileAtOrBeforeStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.WithRolling(), checkpoint.SaveEvery(10))
	for step := int64(1); step <= 3; step++ {
		_, _, err := s.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	removed, err := s.Truncate(ctx, 3)
	require.NoError(t, err)
	require.Empty(t, removed)
	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindRolling, info.Kind)
	require.Equal(t, int64(3), info.Step)
}

func TestTruncateErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	_, err := s.Truncate(ctx, -1)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	r := openStore[int](t, dir, checkpoint.ReadOnly())
	_, err = r.Truncate(ctx, 0)
	require.ErrorIs(t, err, checkpoint.ErrReadOnly)
	var e *checkpoint.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "truncate", e.Op)
}

// TestRetentionNeverRemovesTheNewestCleanCheckpoint saves clean steps and
// then an error checkpoint that no rule keeps either: the error checkpoint
// is what Latest resumes from, but the newest clean step must survive too,
// or LatestClean finds nothing. PruneKinds does not change that.
func TestRetentionNeverRemovesTheNewestCleanCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []checkpoint.Option
		left []int64
	}{
		{"error kept by default", nil, []int64{5, 6}},
		{"errors prunable", []checkpoint.Option{checkpoint.PruneKinds(checkpoint.KindError, checkpoint.KindFinal)}, []int64{5, 6}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openStore[int](t, t.TempDir(), append([]checkpoint.Option{checkpoint.KeepMultiplesOf(100), checkpoint.NoSync()}, c.opts...)...)
			for step := int64(1); step <= 5; step++ {
				_, err := s.Save(ctx, step, int(step))
				require.NoError(t, err)
			}
			_, err := s.SaveError(ctx, 6, 6, errors.New("step 6 failed"))
			require.NoError(t, err)
			list, err := s.List(ctx)
			require.NoError(t, err)
			require.Equal(t, c.left, steps(list))
			v, info, err := s.LatestClean(ctx)
			require.NoError(t, err, "the newest clean checkpoint was pruned")
			require.Equal(t, 5, v)
			require.Equal(t, checkpoint.KindStep, info.Kind)
			_, info, err = s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, checkpoint.KindError, info.Kind)
		})
	}
}

// TestKeepWithinAfterAPauseKeepsTheNewestCleanCheckpoint: a run pauses
// for a day and the first step after the pause fails. KeepWithin(time.Hour)
// keeps nothing clean, yet the newest clean step must survive for
// LatestClean.
func TestKeepWithinAfterAPauseKeepsTheNewestCleanCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s := openStore[int](t, t.TempDir(), checkpoint.KeepWithin(time.Hour), checkpoint.NoSync(), checkpoint.WithClock(clock.now))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	clock.mu.Lock()
	clock.t = clock.t.Add(24 * time.Hour)
	clock.mu.Unlock()
	_, err := s.SaveError(ctx, 4, 4, errors.New("the first step after the pause failed"))
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4}, steps(list))
	v, _, err := s.LatestClean(ctx)
	require.NoError(t, err, "the newest clean checkpoint was pruned")
	require.Equal(t, 3, v)

	// A clean step saved now takes over: the old one goes, and so does
	// the error checkpoint it supersedes.
	_, err = s.Save(ctx, 5, 5)
	require.NoError(t, err)
	list, err = s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{5}, steps(list))
}

// TestPruneFromCacheSeesCheckpointsRemovedByHand: a store that prunes from
// its header cache must not count a checkpoint someone removed behind its
// back. With KeepLast(3) over steps 3, 4, 5, steps 4 and 5 removed by hand
// and step 6 saved, the rule keeps 3 and 6: judging from the cache alone
// would remove step 3, the last of the older ones.
func TestPruneFromCacheSeesCheckpointsRemovedByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.KeepLast(3))
	for step := int64(1); step <= 5; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.Equal(t, []string{"c_003.json", "c_004.json", "c_005.json"}, checkpointNames(t, dir))
	require.NoError(t, os.Remove(filepath.Join(dir, "c_004.json")))
	require.NoError(t, os.Remove(filepath.Join(dir, "c_005.json")))
	_, err := s.Save(ctx, 6, 6)
	require.NoError(t, err)
	require.Equal(t, []string{"c_003.json", "c_006.json"}, checkpointNames(t, dir))
	v, _, err := s.Load(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

// TestPruneFromCacheLeavesFilesItDoesNotKnow: a checkpoint put in the
// directory by hand after the store's first prune is not in its cache: a
// prune after a save neither removes it nor counts it, so the rules keep
// more, never less; Prune, which reads the directory, applies the rules to
// it.
func TestPruneFromCacheLeavesFilesItDoesNotKnow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.KeepLast(2))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	// Step 1, long pruned, comes back: saved by another store, copied in.
	o := openStore[int](t, t.TempDir(), checkpoint.WithLayout("c", 3))
	one, err := o.Save(ctx, 1, 1)
	require.NoError(t, err)
	b, err := os.ReadFile(one.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c_001.json"), b, 0o644))
	_, err = s.Save(ctx, 4, 4)
	require.NoError(t, err)
	require.Equal(t, []string{"c_001.json", "c_003.json", "c_004.json"}, checkpointNames(t, dir))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1}, steps(removed))
}

// TestASaveWhosePruneFailsSucceedsAndTheNextSaveRemovesWhatItLeft fails
// the removal a save's prune makes from the header cache: the save
// succeeds, the prune's failure is reported, the file it could not remove
// is whole, and the next save removes it.
func TestASaveWhosePruneFailsSucceedsAndTheNextSaveRemovesWhatItLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var armed atomic.Bool // the next removal fails, once
	fault := func(op inject.Op) error {
		if op.Kind == inject.Remove && armed.CompareAndSwap(true, false) {
			return fmt.Errorf("remove %s: %w", op.Name, errFault)
		}
		return nil
	}
	var pruneErrs []error
	var mu sync.Mutex
	hooks := checkpoint.Hooks{OnError: func(err error) { mu.Lock(); pruneErrs = append(pruneErrs, err); mu.Unlock() }}
	s := openFaulty[int](t, dir, fault, checkpoint.WithLayout("c", 3), checkpoint.KeepLast(2), checkpoint.WithHooks(hooks))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	armed.Store(true)
	_, err := s.Save(ctx, 4, 4)
	require.NoError(t, err, "the checkpoint is saved; only the prune failed")
	mu.Lock()
	require.Len(t, pruneErrs, 1)
	require.ErrorIs(t, pruneErrs[0], errFault)
	mu.Unlock()
	require.Equal(t, []string{"c_002.json", "c_003.json", "c_004.json"}, checkpointNames(t, dir))
	// Read by another store: s's cache stays as the prune left it.
	v, info, err := openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.ReadOnly()).Load(ctx, 2)
	require.NoError(t, err, "the file the prune could not remove is whole")
	require.Equal(t, int64(2), info.Step)
	require.Equal(t, 2, v)
	_, err = s.Save(ctx, 5, 5)
	require.NoError(t, err)
	require.Equal(t, []string{"c_004.json", "c_005.json"}, checkpointNames(t, dir))
}

// A Prune of which one removal fails (an immutable file) returns the
// removals that worked with the error, and tells OnPrune of them; the
// file it could not remove stays.
func TestPruneReportsWhatItRemovedWhenOneRemovalFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithLayout("c", 3))
	for step := int64(1); step <= 5; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	stuck := filepath.Join(dir, "c_002.json")
	if out, err := exec.Command("chattr", "+i", stuck).CombinedOutput(); err != nil {
		t.Skipf("cannot make a file immutable here (chattr +i: %v %s)", err, out)
	}
	defer exec.Command("chattr", "-i", stuck).Run()
	var hooked []checkpoint.Info
	s = openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.KeepLast(1), checkpoint.WithHooks(checkpoint.Hooks{OnPrune: func(infos []checkpoint.Info) { hooked = infos }}))
	removed, err := s.Prune(ctx)
	require.ErrorIs(t, err, fs.ErrPermission)
	require.Equal(t, []int64{1, 3, 4}, steps(removed), "the removals that worked are reported")
	require.Equal(t, removed, hooked)
	require.FileExists(t, stuck)
}

// errFault is the error of the faults openFaulty injects.
var errFault = errors.New("injected fault")

// openFaulty opens a store, with NoSync, on the directory dir wrapped in
// inject.Wrap with fault: faults of whole Backend operations.
func openFaulty[T any](t *testing.T, dir string, fault func(inject.Op) error, opts ...checkpoint.Option) *checkpoint.Store[T] {
	t.Helper()
	d, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	s, err := checkpoint.OpenBackend[T](inject.Wrap(d, fault), append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// kindsOf lists each checkpoint as its step and kind's initial: 5e, 6s.
func kindsOf(list []checkpoint.Info) []string {
	var out []string
	for _, i := range list {
		out = append(out, fmt.Sprintf("%d%s", i.Step, string(i.Kind)[:1]))
	}
	return out
}

func TestCleanCheckpointSavedAfterAnErrorCheckpointSupersedesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fail := errors.New("boom")
	for _, tc := range []struct {
		name string
		do   func(s *checkpoint.Store[int]) error
		want []string
	}{
		{"the step redone", func(s *checkpoint.Store[int]) error {
			_, err := s.SaveError(ctx, 5, 4, fail)
			if err == nil {
				_, err = s.Save(ctx, 5, 5)
			}
			return err
		}, []string{"5s"}},
		{"a later step", func(s *checkpoint.Store[int]) error {
			_, err := s.SaveError(ctx, 5, 4, fail)
			if err == nil {
				_, err = s.Save(ctx, 6, 6)
			}
			return err
		}, []string{"6s"}},
		{"a final checkpoint", func(s *checkpoint.Store[int]) error {
			_, err := s.SaveError(ctx, 5, 4, fail)
			if err == nil {
				_, err = s.SaveFinal(ctx, 5, 5)
			}
			return err
		}, []string{"5f"}},
		{"every attempt", func(s *checkpoint.Store[int]) error {
			for range 2 {
				if _, err := s.SaveError(ctx, 5, 4, fail); err != nil {
					return err
				}
			}
			_, err := s.Save(ctx, 5, 5)
			return err
		}, []string{"5s"}},
		{"not a clean checkpoint saved before it, of its step", func(s *checkpoint.Store[int]) error {
			_, err := s.Save(ctx, 5, 5)
			if err == nil {
				_, err = s.SaveError(ctx, 5, 5, fail)
			}
			return err
		}, []string{"5s", "5e"}},
		{"not one saved before it, of a later step", func(s *checkpoint.Store[int]) error {
			_, err := s.Save(ctx, 6, 6)
			if err == nil {
				_, err = s.SaveError(ctx, 5, 4, fail)
			}
			return err
		}, []string{"5e", "6s"}},
		{"not an error checkpoint", func(s *checkpoint.Store[int]) error {
			_, err := s.SaveError(ctx, 5, 4, fail)
			if err == nil {
				_, err = s.SaveError(ctx, 6, 5, fail)
			}
			return err
		}, []string{"5e", "6e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openStore[int](t, t.TempDir(), checkpoint.NoSync())
			require.NoError(t, tc.do(s))
			list, err := s.List(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.want, kindsOf(list), "without any retention rule")
		})
	}
}

// TestPayloadSavedAfterAnErrorCheckpointSupersedesIt proves that a byte
// payload is a clean checkpoint like any other: saved by SaveFrom after an
// error checkpoint, of a later step, it supersedes it, and the store
// removes the error checkpoint without any retention rule.
func TestPayloadSavedAfterAnErrorCheckpointSupersedesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[[]byte](t, dir)
	ei, err := s.SaveError(ctx, 3, []byte("partial"), errors.New("boom"))
	require.NoError(t, err)
	_, err = s.SaveFrom(ctx, 4, writeAll(payloadBytes(4, 3000)))
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"4s"}, kindsOf(list), "the payload's save superseded the error checkpoint")
	_, err = s.Prune(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoFileExists(t, ei.Location)
}

func TestRollingFileSupersedesAnErrorCheckpointAtTheNextNumberedSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.SaveEvery(3), checkpoint.WithRolling(), checkpoint.NoSync())
	_, err := s.SaveError(ctx, 4, 3, errors.New("boom"))
	require.NoError(t, err)
	_, _, err = s.Tick(ctx, 4, 4) // the failed step redone, saved to the rolling file only
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"4e", "4r"}, kindsOf(list), "a rolling write prunes nothing")
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindRolling, info.Kind, "Latest resumes past a superseded error checkpoint")
	require.Equal(t, 4, v)
	plan, err := s.PruneDryRun(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"4e"}, kindsOf(plan))

	_, _, err = s.Tick(ctx, 5, 5)
	require.NoError(t, err)
	_, _, err = s.Tick(ctx, 6, 6) // numbered
	require.NoError(t, err)
	list, err = s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"5r", "6s"}, kindsOf(list), "the numbered save's retention pass removes it")
}

func TestErrorCheckpointStaysWhileTheCleanOneAfterItDoesNotLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, other := t.TempDir(), t.TempDir()
	clock := newClock()
	s := openStore[int](t, dir, checkpoint.NoSync(), checkpoint.WithClock(clock.now))
	_, err := s.SaveError(ctx, 5, 4, errors.New("boom"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	// A clean step 6 saved after it, by another store.
	o := openStore[int](t, other, checkpoint.NoSync(), checkpoint.WithClock(clock.now))
	info, err := o.Save(ctx, 6, 6)
	require.NoError(t, err)
	good, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	damaged := bytes.Replace(good, []byte(`"state":6`), []byte(`"state":7`), 1)
	require.NotEqual(t, good, damaged)
	require.NoError(t, os.WriteFile(filepath.Join(dir, info.Name()), damaged, 0o644))

	s = openStore[int](t, dir, checkpoint.NoSync(), checkpoint.WithClock(clock.now))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Empty(t, removed, "a damaged clean checkpoint supersedes nothing")
	_, latest, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, latest.Kind, "Latest falls back to the error checkpoint")

	require.NoError(t, os.WriteFile(filepath.Join(dir, info.Name()), good, 0o644))
	removed, err = s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"5e"}, kindsOf(removed), "once it loads, it does")
}

func TestKeepLastKeepsAnErrorCheckpointUntilSuperseded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.KeepLast(2), checkpoint.NoSync())
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	_, err := s.SaveError(ctx, 4, 3, errors.New("boom"))
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"2s", "3s", "4e"}, kindsOf(list), "not counted by KeepLast, not superseded")
	_, err = s.Save(ctx, 4, 4)
	require.NoError(t, err)
	list, err = s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"3s", "4s"}, kindsOf(list))
}

// TestSavesBesideAnErrorCheckpointNoSaveCanSupersedeListNothing: without
// retention rules a pass removes only superseded error checkpoints, so a
// save that cannot supersede any error checkpoint left (a torn one, which
// nothing supersedes; one stamped after every later save, by a clock that
// was far ahead) makes no pass: on object storage a save stays one PUT,
// with no LIST, however many saves follow. A SaveError then a clean save
// still makes one, and removes only what that save superseded.
func TestSavesBesideAnErrorCheckpointNoSaveCanSupersedeListNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const errName = "step_00000005.error.json" // step 5's first error checkpoint in the default layout
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, dir string)
	}{
		{"torn", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, errName), []byte(`{"format":1,"st`), 0o644))
		}},
		{"stamped ahead", func(t *testing.T, dir string) {
			ahead := func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }
			o := openStore[int](t, t.TempDir(), checkpoint.NoSync(), checkpoint.WithClock(ahead))
			info, err := o.SaveError(ctx, 5, 4, errors.New("boom"))
			require.NoError(t, err)
			b, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, errName), b, 0o644))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tc.plant(t, dir)
			b := newCountingBackend(t, dir)
			s, err := checkpoint.OpenBackend[int](b, checkpoint.NoSync())
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			b.reset()
			_, err = s.Save(ctx, 6, 6)
			require.NoError(t, err)
			calls := b.reset()
			require.Equal(t, 1, calls["List"], "the first save reads the error checkpoint's header, Open having listed its name: %v", calls)
			const saves = 20
			for step := int64(7); step < 7+saves; step++ {
				_, err := s.Save(ctx, step, int(step))
				require.NoError(t, err)
			}
			require.Equal(t, map[string]int{"Create": saves}, b.reset(), "a save is one PUT")

			_, err = s.SaveError(ctx, 30, 29, errors.New("boom"))
			require.NoError(t, err)
			_, err = s.Save(ctx, 30, 30)
			require.NoError(t, err)
			calls = b.reset()
			require.Equal(t, 1, calls["Remove"], "the clean save's pass removes the error checkpoint it superseded: %v", calls)
			list, err := s.List(ctx)
			require.NoError(t, err)
			require.NotContains(t, kindsOf(list), "30e")
			_, err = os.Stat(filepath.Join(dir, errName))
			require.NoError(t, err, "the error checkpoint no save superseded stays")
			b.reset()
			_, err = s.Save(ctx, 31, 31)
			require.NoError(t, err)
			require.Equal(t, map[string]int{"Create": 1}, b.reset(), "and the next save is one PUT again")
		})
	}
}

// TestCloseRemovesAnErrorCheckpointThatASaveLeftSuperseded: a save whose
// pass did not remove the error checkpoint it superseded (a kill, here a
// removal that fails) leaves it to a later run, which may save nothing:
// its SaveFinal is ErrExists. That run's Close removes it. A failure of
// Close's pass goes to the logger and Hooks.OnError, not to Close's
// result: the checkpoints are all in place.
func TestCloseRemovesAnErrorCheckpointThatASaveLeftSuperseded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var failing atomic.Bool // removals fail
	fault := func(op inject.Op) error {
		if op.Kind == inject.Remove && failing.Load() {
			return fmt.Errorf("remove %s: %w", op.Name, errFault)
		}
		return nil
	}
	failing.Store(true)
	var reported []error
	hooks := checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) { reported = append(reported, err) }})
	s := openFaulty[int](t, dir, fault, checkpoint.NoSync(), hooks)
	_, err := s.SaveError(ctx, 5, 4, errors.New("boom"))
	require.NoError(t, err)
	_, err = s.SaveFinal(ctx, 5, 5)
	require.NoError(t, err, "the pass's failure is not the save's")
	require.NoError(t, s.Close(), "nor Close's")
	require.Len(t, reported, 2, "the save's pass and Close's both failed, and said so: %v", reported)
	require.ErrorIs(t, reported[1], errFault)

	failing.Store(false)
	s = openFaulty[int](t, dir, fault, checkpoint.NoSync())
	_, err = s.SaveFinal(ctx, 5, 5)
	require.ErrorIs(t, err, checkpoint.ErrExists, "the next run saves nothing")
	require.NoError(t, s.Close())
	list, err := openStore[int](t, dir, checkpoint.ReadOnly()).List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"5f"}, kindsOf(list), "its Close removed the superseded error checkpoint")
}

// stringerName is a name that encodes as a JSON string: encoding/json saves it
// inside an interface field, and cannot decode it back into one.
type stringerName string

func (l stringerName) String() string { return string(l) }

// labelled is a state that encoding/json saves whatever its Label, and
// cannot load once Label is set.
type labelled struct {
	Step  int          `json:"step"`
	Label fmt.Stringer `json:"label,omitempty"`
}

// An error checkpoint is superseded by a clean checkpoint that loads, and
// that is proven by loading it when the error checkpoint is to go, even if
// this store saved it: a state that encoding/json writes and cannot read
// back (an interface field) makes a checkpoint that Latest passes over, to
// the error checkpoint before it. So the failure stays on record, and
// Latest resumes at the failed step, with no rule, with a rule that would
// remove both, and after Close's pass.
func TestAnErrorCheckpointStaysWhileTheCleanOneSavedAfterItDoesNotDecode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []checkpoint.Option
	}{
		{"no rule", nil},
		{"KeepLast(1) of every kind", []checkpoint.Option{checkpoint.KeepLast(1), checkpoint.PruneKinds(checkpoint.KindError, checkpoint.KindFinal)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openStore[labelled](t, t.TempDir(), tc.opts...)
			_, err := s.Save(ctx, 4, labelled{Step: 4})
			require.NoError(t, err)
			errInfo, err := s.SaveError(ctx, 5, labelled{Step: 5}, errors.New("step 5 failed"))
			require.NoError(t, err)
			bad, err := s.Save(ctx, 5, labelled{Step: 5, Label: stringerName("redo")})
			require.NoError(t, err, "encoding/json encodes it")
			_, _, err = s.LoadExact(ctx, bad)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt, "and cannot decode it")

			removed, err := s.Prune(ctx)
			require.NoError(t, err)
			require.Empty(t, removed)
			require.NoError(t, s.Close())
			_, err = os.Stat(errInfo.Path)
			require.NoError(t, err, "the error checkpoint stays")

			s = openStore[labelled](t, filepath.Dir(errInfo.Path), checkpoint.ReadOnly())
			v, latest, err := s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, checkpoint.KindError, latest.Kind, "Latest redoes the failed step")
			require.Equal(t, labelled{Step: 5}, v)
		})
	}
}

// Retention never removes the newest checkpoint that loads, and a file of a
// newer schema counts as one: it is a newer release's, not damage.
func TestRetentionKeepsNewerSchemaFileAsLoadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveAt(t, dir, 1, heroV1{Name: "Ana"}, checkpoint.WithSchema(1, heroMigrations[0]))
	saveAt(t, dir, 2, heroV1{Name: "Ana"}, checkpoint.WithSchema(1, heroMigrations[0]))
	saveAt(t, dir, 3, heroV2{Name: "Ana"}, checkpoint.WithSchema(2, heroMigrations...))

	// KeepMultiplesOf(10) keeps none of steps 1-3: only the newest checkpoint
	// that loads is spared.
	s := openStore[heroV1](t, dir, checkpoint.WithSchema(1, heroMigrations[0]), checkpoint.KeepMultiplesOf(10), checkpoint.NoSync())
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, steps(removed))
	require.FileExists(t, filepath.Join(dir, "step_00000003.json"))
}

// PruneKinds of the step or rolling kind, or of a kind that is none, is
// ErrInvalid naming the option; of the final and error kinds, it opens.
func TestPruneKindsOfStepOrRollingIsInvalid(t *testing.T) {
	t.Parallel()
	for _, k := range []checkpoint.Kind{checkpoint.KindStep, checkpoint.KindRolling, "final "} {
		_, err := checkpoint.Open[int](t.TempDir(), checkpoint.KeepLast(1), checkpoint.PruneKinds(k))
		require.ErrorIs(t, err, checkpoint.ErrInvalid, k)
		require.ErrorContains(t, err, fmt.Sprintf("PruneKinds(%q)", k))
	}
	s, err := checkpoint.Open[int](t.TempDir(), checkpoint.KeepLast(1), checkpoint.PruneKinds(checkpoint.KindFinal, checkpoint.KindError))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
