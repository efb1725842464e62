package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// saveMetric saves step with the metric name set to v, or without it if
// v is nil.
func saveMetric(t *testing.T, s *checkpoint.Store[int], step int64, name string, v *float64) {
	t.Helper()
	var opts []checkpoint.SaveOption
	if v != nil {
		opts = append(opts, checkpoint.WithMetric(name, *v))
	}
	_, err := s.Save(context.Background(), step, int(step), opts...)
	require.NoError(t, err)
}

func metricValue(v float64) *float64 { return &v }

// listedSteps returns the steps of the store's checkpoints, oldest first.
func listedSteps(t *testing.T, s *checkpoint.Store[int]) []int64 {
	t.Helper()
	list, err := s.List(context.Background())
	require.NoError(t, err)
	return steps(list)
}

// KeepBest keeps the n checkpoints with the lowest (Minimize) or highest
// (Maximize) value of the metric, and the newest, pruning after each save.
func TestKeepBestKeepsTheBestByTheGoal(t *testing.T) {
	t.Parallel()
	losses := []float64{5, 3, 8, 1, 9, 2, 7, 6, 4, 10}
	for _, tc := range []struct {
		goal checkpoint.Goal
		want []int64
	}{
		{checkpoint.Minimize, []int64{4, 6, 10}}, // 1 and 2, and the newest
		{checkpoint.Maximize, []int64{5, 10}},    // 9 and 10, the newest
	} {
		t.Run(tc.goal.String(), func(t *testing.T) {
			t.Parallel()
			s := openStore[int](t, t.TempDir(), checkpoint.KeepBest(2, "loss", tc.goal))
			for i, l := range losses {
				saveMetric(t, s, int64(i+1), "loss", metricValue(l))
			}
			require.Equal(t, tc.want, listedSteps(t, s))
		})
	}
}

// KeepBest combines with KeepLast: a checkpoint survives if either keeps
// it. Checkpoints without the metric never count as best, and of equal
// values the newer is kept.
func TestKeepBestCombinesWithKeepLastAndSkipsMissingMetrics(t *testing.T) {
	t.Parallel()
	s := openStore[int](t, t.TempDir(), checkpoint.KeepBest(2, "acc", checkpoint.Maximize), checkpoint.KeepLast(2))
	accs := []*float64{metricValue(0.9), nil, metricValue(0.95), metricValue(0.9), nil, metricValue(0.1), nil, nil}
	for i, a := range accs {
		saveMetric(t, s, int64(i+1), "acc", a)
	}
	// 0.95 (3) and the newer 0.9 (4); the last two (7, 8), without it.
	require.Equal(t, []int64{3, 4, 7, 8}, listedSteps(t, s))

	// With no checkpoint bearing the metric, KeepBest keeps none.
	s = openStore[int](t, t.TempDir(), checkpoint.KeepBest(3, "acc", checkpoint.Maximize))
	for step := int64(1); step <= 4; step++ {
		saveMetric(t, s, step, "other", metricValue(1))
	}
	require.Equal(t, []int64{4}, listedSteps(t, s), "the newest only")
}

// Two KeepBest rules, on different metrics, both apply.
func TestTwoKeepBestRulesBothApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.KeepBest(1, "loss", checkpoint.Minimize), checkpoint.KeepBest(1, "acc", checkpoint.Maximize))
	for step, m := range [][2]float64{{3, 0.5}, {1, 0.6}, {2, 0.9}, {4, 0.1}, {5, 0.2}} {
		_, err := s.Save(ctx, int64(step+1), step, checkpoint.WithMetric("loss", m[0]), checkpoint.WithMetric("acc", m[1]))
		require.NoError(t, err)
	}
	require.Equal(t, []int64{2, 3, 5}, listedSteps(t, s), "the lowest loss, the highest acc, the newest")
	dry, err := s.PruneDryRun(ctx)
	require.NoError(t, err)
	require.Empty(t, dry)
}

// Whatever the metrics, KeepBest never removes the newest checkpoint, the
// newest that is not an error checkpoint, nor the newest final checkpoint,
// even when those kinds are subject to the rules.
func TestKeepBestNeverRemovesTheNewestTheNewestCleanOrTheFinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.KeepBest(1, "loss", checkpoint.Minimize),
		checkpoint.PruneKinds(checkpoint.KindFinal, checkpoint.KindError))
	saveMetric(t, s, 1, "loss", metricValue(0.5))
	_, err := s.SaveFinal(ctx, 2, 2, checkpoint.WithMetric("loss", 9))
	require.NoError(t, err)
	saveMetric(t, s, 3, "loss", metricValue(8))
	_, err = s.SaveFinal(ctx, 4, 4, checkpoint.WithMetric("loss", 7))
	require.NoError(t, err)
	saveMetric(t, s, 5, "loss", metricValue(6))
	_, err = s.SaveError(ctx, 6, 6, errors.New("boom"), checkpoint.WithMetric("loss", 0.1))
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	var got []string
	for _, i := range list {
		got = append(got, i.Name())
	}
	require.Equal(t, []string{
		"step_00000004.final.json", // the newest final; the older one (2) is gone
		"step_00000005.json",       // the newest clean
		"step_00000006.error.json", // the newest, and the best
	}, got, "step 1 was best until the error checkpoint")
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
}

// KeepBest keeps the checkpoint this writer resumed from (the last one a
// Latest, LatestClean, Load or LoadExact returned), for as long as the
// store is open; a store opened afresh has resumed from nothing.
func TestKeepBestKeepsTheCheckpointThisWriterResumedFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	for step, l := range []float64{1, 9, 8, 7} {
		saveMetric(t, s, int64(step+1), "loss", metricValue(l))
	}
	require.NoError(t, s.Close())
	rule := checkpoint.KeepBest(1, "loss", checkpoint.Minimize)

	s = openStore[int](t, dir, rule)
	_, info, err := s.Load(ctx, 2) // the worst
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"loss": 9}, info.Metrics)
	saveMetric(t, s, 5, "loss", metricValue(6))
	require.Equal(t, []int64{1, 2, 5}, listedSteps(t, s), "the best, the one resumed from, the newest")
	dry, err := s.PruneDryRun(ctx)
	require.NoError(t, err)
	require.Empty(t, dry)

	// Resuming from another moves the protection to it.
	_, _, err = s.LoadExact(ctx, info) // still step 2
	require.NoError(t, err)
	_, info, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), info.Step)
	saveMetric(t, s, 6, "loss", metricValue(5))
	require.Equal(t, []int64{1, 5, 6}, listedSteps(t, s), "step 2 went once the writer resumed from step 5")
	require.NoError(t, s.Close())

	// A new Open resumed from nothing yet.
	s = openStore[int](t, dir, rule)
	saveMetric(t, s, 7, "loss", metricValue(4))
	require.Equal(t, []int64{1, 7}, listedSteps(t, s))
}

// KeepBest with a count under 1, an empty or bad metric name or no goal is
// ErrInvalid at Open, naming the rule.
func TestKeepBestRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt  checkpoint.Option
		says string
	}{
		{checkpoint.KeepBest(0, "loss", checkpoint.Minimize), `KeepBest(0, "loss", minimize): the count must be at least 1`},
		{checkpoint.KeepBest(-1, "loss", checkpoint.Maximize), `KeepBest(-1, "loss", maximize)`},
		{checkpoint.KeepBest(1, "", checkpoint.Minimize), `KeepBest(1, "", minimize): invalid argument: metric "": the name is empty`},
		{checkpoint.KeepBest(1, "a\xffb", checkpoint.Minimize), `metric "a\xffb": the name is not valid UTF-8`},
		{checkpoint.KeepBest(1, "loss", checkpoint.Goal(0)), `KeepBest(1, "loss", Goal(0)): the goal must be Minimize or Maximize`},
	} {
		dir := t.TempDir()
		_, err := checkpoint.Open[int](dir, checkpoint.KeepLast(3), tc.opt)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, tc.says)
		require.ErrorContains(t, err, tc.says)
	}
}

// Metrics are read from the files by a store opened after a restart: its
// first prune keeps the best by what the files say.
func TestKeepBestJudgesAfterARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.Gzip())
	for step := int64(1); step <= 30; step++ {
		saveMetric(t, s, step, "loss", metricValue(float64((step*7)%30))) // 0 at step 30, 1 at 13, 2 at 26
	}
	require.NoError(t, s.Close())
	s = openStore[int](t, dir, checkpoint.KeepBest(3, "loss", checkpoint.Minimize), checkpoint.KeepLast(1))
	dry, err := s.PruneDryRun(ctx)
	require.NoError(t, err)
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, dry, removed)
	require.Len(t, removed, 27)
	require.Equal(t, []int64{13, 26, 30}, listedSteps(t, s))
}

// relabelInIndex rewrites the store's header index in dir, as any program
// can (its checksum is no signature), replacing old with new in the line
// of the file name: the file itself, and its Version, are untouched.
func relabelInIndex(t *testing.T, dir, name, old, new string) {
	t.Helper()
	path := filepath.Join(dir, checkpoint.IndexName)
	idx, err := os.ReadFile(path)
	require.NoError(t, err)
	end := bytes.LastIndexByte(idx[:len(idx)-1], '\n') + 1
	out := []byte(checkpoint.IndexMagic)
	found := false
	for _, l := range bytes.SplitAfter(idx[len(checkpoint.IndexMagic):end], []byte{'\n'}) {
		if bytes.HasPrefix(l, []byte(name+"\t")) {
			require.Contains(t, string(l), old)
			l = bytes.Replace(l, []byte(old), []byte(new), 1)
			found = true
		}
		out = append(out, l...)
	}
	require.True(t, found, "the index holds %s", name)
	n := bytes.Count(out[len(checkpoint.IndexMagic):], []byte{'\n'})
	out = fmt.Appendf(out, "end %d %08x\n", n, crc32.Checksum(out, checkpoint.IndexCRC))
	require.NoError(t, os.WriteFile(path, out, 0o644))
}

// The metrics KeepBest removes checkpoints by are the files', never the
// header index's alone: an index that makes another checkpoint look best
// does not make a victim of the true best, and one that makes a checkpoint
// look worse does not remove it.
func TestKeepBestJudgesOnTheFilesMetricsNotTheIndexs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	steps := int64(checkpoint.IndexMinWrite + 20)
	dir := t.TempDir()
	w := openStore[int](t, dir)
	for step := int64(1); step <= steps; step++ {
		saveMetric(t, w, step, "loss", metricValue(float64(step))) // step 1 is the best
	}
	require.NoError(t, w.Close())
	relabelInIndex(t, dir, "step_00000200.json", `"metrics":{"loss":200}`, `"metrics":{"loss":0}`)
	relabelInIndex(t, dir, "step_00000001.json", `"metrics":{"loss":1}`, `"metrics":{"loss":1000}`)

	s := openStore[int](t, dir, checkpoint.KeepBest(1, "loss", checkpoint.Minimize))
	dry, err := s.PruneDryRun(ctx)
	require.NoError(t, err)
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, dry, removed)
	require.Len(t, removed, int(steps)-2)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, int64(1), list[0].Step)
	require.Equal(t, map[string]float64{"loss": 1}, list[0].Metrics)
	require.Equal(t, steps, list[1].Step)
}

// TestKeepBestKeepsTheNewestPayloadThatVerifies proves that when the
// newest byte payload is damaged, KeepBest never prunes the newest payload
// that verifies, the one LatestPayload resumes from, even when the metric
// ranks it out.
func TestKeepBestKeepsTheNewestPayloadThatVerifies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[[]byte](t, dir)
	for step, loss := range map[int64]float64{1: 1, 2: 5, 3: 7} {
		_, err := w.SaveFrom(ctx, step, writeAll(payloadBytes(uint64(step), 5000)), checkpoint.WithMetric("loss", loss))
		require.NoError(t, err)
	}
	list, err := w.List(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	data := mustRead(t, list[2].Location)
	data[len(data)/2] ^= 1
	require.NoError(t, os.WriteFile(list[2].Location, data, 0o644))

	s := openStore[[]byte](t, dir, checkpoint.KeepBest(1, "loss", checkpoint.Minimize))
	_, err = s.Prune(ctx)
	require.NoError(t, err)
	require.FileExists(t, list[1].Location, "the newest payload that verifies was pruned")
	r, info, err := s.LatestPayload(ctx)
	require.NoError(t, err)
	r.Close()
	require.Equal(t, int64(2), info.Step)
}
