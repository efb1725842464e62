package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// Every save that takes SaveOptions records metrics in the header: the Info
// it returns, List, Latest and a store opened after a restart all give them.
func TestMetricsAreRecordedByEverySaveAndSurviveARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	opts := []checkpoint.Option{checkpoint.WithLayout("m", 3), checkpoint.SaveEvery(2), checkpoint.WithRolling(), checkpoint.Zstd()}
	s := openStore[int](t, dir, opts...)
	want := map[string]map[string]float64{
		"m_002.json.zst":       {"loss": 0.5, "acc": 0.75},
		"m_last.json.zst":      {"loss": 0.25},
		"m_003.final.json.zst": {"loss": -1e-9, "Ünïcode/val": 1e300},
		"m_005.json.zst":       nil,
		"m_006.json.zst":       {"loss": 0},
		"m_007.final.json.zst": nil,
		"m_008.error.json.zst": {"loss": 7},
	}
	got := make(map[string]map[string]float64)
	info, err := s.Save(ctx, 2, 2, checkpoint.WithMetric("loss", 0.5), checkpoint.WithMetric("acc", 0.75), checkpoint.WithMeta("k", "v"))
	require.NoError(t, err)
	got[info.Name()] = info.Metrics
	info, saved, err := s.Tick(ctx, 3, 3, checkpoint.WithMetric("loss", 1), checkpoint.WithMetric("loss", 0.25)) // the last value of a name
	require.NoError(t, err)
	require.True(t, saved)
	require.Equal(t, checkpoint.KindRolling, info.Kind)
	got[info.Name()] = info.Metrics
	info, err = s.SaveFinal(ctx, 3, 3, checkpoint.WithMetric("loss", -1e-9), checkpoint.WithMetric("Ünïcode/val", 1e300))
	require.NoError(t, err)
	got[info.Name()] = info.Metrics
	info, err = s.Save(ctx, 5, 5)
	require.NoError(t, err)
	got[info.Name()] = info.Metrics
	info, saved, err = s.Tick(ctx, 6, 6, checkpoint.WithMetric("loss", 0))
	require.NoError(t, err)
	require.True(t, saved)
	got[info.Name()] = info.Metrics
	info, err = s.SaveFinal(ctx, 7, 7)
	require.NoError(t, err)
	got[info.Name()] = info.Metrics
	info, err = s.SaveError(ctx, 8, 8, errors.New("boom"), checkpoint.WithMetric("loss", 7))
	require.NoError(t, err)
	got[info.Name()] = info.Metrics
	require.Equal(t, want, got, "the Info of each save")

	listed := func(s *checkpoint.Store[int]) map[string]map[string]float64 {
		list, err := s.List(ctx)
		require.NoError(t, err)
		out := make(map[string]map[string]float64)
		for _, i := range list {
			out[i.Name()] = i.Metrics
		}
		return out
	}
	require.Equal(t, want, listed(s))
	require.NoError(t, s.Close())

	r := openStore[int](t, dir, append(opts, checkpoint.ReadOnly())...)
	require.Equal(t, want, listed(r), "after a restart")
	_, info, err = r.LatestClean(ctx)
	require.NoError(t, err)
	require.Equal(t, "m_007.final.json.zst", info.Name())
	_, info, err = r.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, want["m_002.json.zst"], info.Metrics)
	require.Equal(t, "v", info.Meta["k"])

	// A header with metrics is plain JSON: a number per metric.
	b := decompress(t, mustRead(t, filepath.Join(dir, "m_002.json.zst")))
	require.Contains(t, string(b), `"meta":{"k":"v"},"metrics":{"acc":0.75,"loss":0.5},"state":2`)
}

// An Async save's Info gives its metrics at once, and the published file
// holds them.
func TestMetricsOfAnAsyncSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.Async(4))
	info, err := s.Save(ctx, 1, 1, checkpoint.WithMetric("loss", 2.5))
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"loss": 2.5}, info.Metrics)
	require.NoError(t, s.Flush(ctx))
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, map[string]float64{"loss": 2.5}, list[0].Metrics)
}

// A metric's name must be 1 to MaxMetricName bytes of valid UTF-8, its
// value finite, and a save records at most MaxMetrics: anything else makes
// the save, of whatever kind, ErrInvalid naming the metric, and nothing is
// written.
func TestBadMetricsAreRefusedAndNothingIsWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	many := make([]checkpoint.SaveOption, checkpoint.MaxMetrics+1)
	for i := range many {
		many[i] = checkpoint.WithMetric(fmt.Sprint("m", i), 1)
	}
	long := strings.Repeat("é", checkpoint.MaxMetricName/2) + "x" // 129 bytes
	for _, tc := range []struct {
		name string
		opts []checkpoint.SaveOption
		says string
	}{
		{"empty name", []checkpoint.SaveOption{checkpoint.WithMetric("", 1)}, `metric "": the name is empty`},
		{"long name", []checkpoint.SaveOption{checkpoint.WithMetric(long, 1)}, fmt.Sprintf("metric %q: the name has 129 bytes", long)},
		{"invalid UTF-8", []checkpoint.SaveOption{checkpoint.WithMetric("lo\xffss", 1)}, `metric "lo\xffss": the name is not valid UTF-8`},
		{"NaN", []checkpoint.SaveOption{checkpoint.WithMetric("ok", 1), checkpoint.WithMetric("loss", math.NaN())}, `metric "loss": the value NaN is not finite`},
		{"+Inf", []checkpoint.SaveOption{checkpoint.WithMetric("loss", math.Inf(1))}, `metric "loss": the value +Inf is not finite`},
		{"-Inf", []checkpoint.SaveOption{checkpoint.WithMetric("reward", math.Inf(-1))}, `metric "reward": the value -Inf is not finite`},
		{"too many", many, fmt.Sprintf("%d metrics, more than %d", len(many), checkpoint.MaxMetrics)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openStore[int](t, dir, checkpoint.WithRolling(), checkpoint.SaveEvery(2))
			saves := map[string]func() error{
				"save step 2":       func() error { _, err := s.Save(ctx, 2, 1, tc.opts...); return err },
				"save step 4":       func() error { _, _, err := s.Tick(ctx, 4, 1, tc.opts...); return err },
				"tick step 5":       func() error { _, _, err := s.Tick(ctx, 5, 1, tc.opts...); return err },
				"save final step 6": func() error { _, err := s.SaveFinal(ctx, 6, 1, tc.opts...); return err },
				"save error step 7": func() error { _, err := s.SaveError(ctx, 7, 1, errors.New("x"), tc.opts...); return err },
			}
			for op, save := range saves {
				err := save()
				require.ErrorIs(t, err, checkpoint.ErrInvalid, op)
				require.ErrorContains(t, err, tc.says, op)
				require.ErrorContains(t, err, op, "the error names the operation and the step")
			}
			require.Empty(t, checkpointNames(t, dir))
		})
	}
	// The limits themselves are fine.
	s := openStore[int](t, t.TempDir())
	info, err := s.Save(ctx, 1, 1, append(many[2:], checkpoint.WithMetric(strings.Repeat("x", checkpoint.MaxMetricName), math.MaxFloat64))...)
	require.NoError(t, err)
	require.Len(t, info.Metrics, checkpoint.MaxMetrics)
}

// saveMetricsStore saves indexedStoreSteps checkpoints with metrics (and a
// few without) in dir and closes the store, which writes the index.
func saveMetricsStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	w := openStore[int](t, dir)
	for step := int64(1); step <= indexedStoreSteps; step++ {
		var opts []checkpoint.SaveOption
		if step%7 != 0 {
			opts = append(opts, checkpoint.WithMetric("loss", float64(step%13)/3), checkpoint.WithMetric("acc", 1/float64(step)))
		}
		_, err := w.Save(ctx, step, int(step), opts...)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	_, err := os.Stat(filepath.Join(dir, checkpoint.IndexName))
	require.NoError(t, err, "Close writes the index")
}

// The first List of a store reopened over the header index gives the
// metrics a scan of the files gives, without opening a checkpoint.
func TestFirstListFromTheIndexGivesTheMetricsAScanGives(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	saveMetricsStore(t, dir)
	want := listWithoutIndex(t, dir)
	require.Equal(t, map[string]float64{"loss": 1.0 / 3, "acc": 1}, want[0].Metrics)
	require.Nil(t, want[6].Metrics)

	s, c := countingReader(t, dir)
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Zero(t, c.checkpointOpens(), "the index describes every file")
	require.Equal(t, want, list)
}

// An index of format 1, which a release that did not know metrics wrote
// (its headers may lack them), is not read: the files are.
func TestFirstListIgnoresAnIndexOfTheFormatBeforeMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	saveMetricsStore(t, dir)
	want := listWithoutIndex(t, dir)
	path := filepath.Join(dir, checkpoint.IndexName)
	idx, err := os.ReadFile(path)
	require.NoError(t, err)
	end := bytes.LastIndexByte(idx[:len(idx)-1], '\n') + 1
	// The index as format 1 would hold it: no metrics, its own checksum.
	out := []byte("checkpoint-index 1\n")
	for _, l := range bytes.SplitAfter(idx[len(checkpoint.IndexMagic):end], []byte{'\n'}) {
		if i := bytes.Index(l, []byte(`,"metrics":{`)); i >= 0 {
			j := bytes.IndexByte(l[i:], '}')
			l = append(bytes.Clone(l[:i]), l[i+j+1:]...)
		}
		out = append(out, l...)
	}
	n := bytes.Count(out, []byte{'\n'}) - 1
	out = fmt.Appendf(out, "end %d %08x\n", n, crc32.Checksum(out, checkpoint.IndexCRC))
	require.NoError(t, os.WriteFile(path, out, 0o644))

	s, c := countingReader(t, dir)
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Equal(t, indexedStoreSteps, c.checkpointOpens(), "every header is read from its file")
	require.Equal(t, want, list)
}

// A header whose metric is not a number (null, edited by hand) never reads
// back as a metric of 0, which KeepBest(Minimize) would rank best: the
// header is damage.
func TestMetricThatIsNotANumberIsDamageNeverZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	_, err := s.Save(ctx, 1, 1, checkpoint.WithMetric("loss", 5))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	var name string
	for _, n := range dirNames(t, dir) {
		if filepath.Ext(n) == ".json" && n != "" && n[0] == 's' {
			name = n
		}
	}
	require.NotEmpty(t, name)
	path := filepath.Join(dir, name)
	b := mustRead(t, path)
	edited := bytes.Replace(b, []byte(`"loss":5`), []byte(`"loss":null`), 1)
	require.NotEqual(t, b, edited)
	require.NoError(t, os.WriteFile(path, edited, 0o644))

	r := openStore[int](t, dir, checkpoint.ReadOnly())
	infos, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	v, ok := infos[0].Metrics["loss"]
	require.False(t, ok && v == 0, "a null metric reads back as 0: %v", infos[0].Metrics)
}

// A hand-edited null metric is not ranked best by KeepBest(1, Minimize):
// Prune keeps the true best (loss 1).
func TestKeepBestNeverRanksAMetricThatIsNotANumber(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir)
	for step, loss := range map[int64]float64{1: 5, 2: 1, 3: 9, 4: 9} {
		_, err := w.Save(ctx, step, int(step), checkpoint.WithMetric("loss", loss))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	path := filepath.Join(dir, "step_00000001.json")
	b := mustRead(t, path)
	edited := bytes.Replace(b, []byte(`"loss":5`), []byte(`"loss":null`), 1)
	require.NotEqual(t, b, edited)
	require.NoError(t, os.WriteFile(path, edited, 0o644))

	s := openStore[int](t, dir, checkpoint.KeepBest(1, "loss", checkpoint.Minimize))
	_, err := s.Prune(ctx)
	require.NoError(t, err)
	_, _, err = s.Load(ctx, 2)
	require.NoError(t, err, "the checkpoint of the lowest loss is kept")
}
