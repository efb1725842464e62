package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// orchestrate runs the orchestrator in-process and returns what it printed.
func orchestrate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out)
	return out.String(), err
}

// inspect opens the sprint's store read-only, as another process would.
func inspect(t *testing.T, dir string) *checkpoint.Store[Sprint] {
	t.Helper()
	store, err := checkpoint.Open[Sprint](filepath.Join(dir, sprintID), checkpoint.WithLayout("step", 3), checkpoint.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store
}

func readResult(t *testing.T, dir string) (Result, error) {
	t.Helper()
	var res Result
	err := inspect(t, dir).ReadJSON(context.Background(), "result.json", &res)
	return res, err
}

func TestCrashedSprintResumesAndFinishes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		flags      []string
		resumeAt   string
		redoStep3  bool
		checkpoint checkpoint.Kind // of the checkpoint resumed from
	}{
		{"rolling", nil, "resuming at story 4 of 7 (rolling checkpoint of step 3", false, checkpoint.KindRolling},
		{"interval only", []string{"-rolling=false"}, "resuming at story 3 of 7 (step checkpoint of step 2", true, checkpoint.KindStep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"-dir", dir}, tc.flags...)

			out, err := orchestrate(t, append(args, "-stop-after", "3")...)
			require.ErrorIs(t, err, errCrash)
			require.Contains(t, out, "starting the sprint")
			require.Contains(t, out, "step 3/7")
			require.NotContains(t, out, "step 4/7")
			_, err = readResult(t, dir)
			require.ErrorIs(t, err, checkpoint.ErrNotFound, "result.json written by a crashed run")
			_, info, err := inspect(t, dir).Latest(context.Background())
			require.NoError(t, err)
			require.Equal(t, tc.checkpoint, info.Kind)

			out, err = orchestrate(t, args...)
			require.NoError(t, err)
			require.Contains(t, out, tc.resumeAt)
			require.Equal(t, tc.redoStep3, strings.Contains(out, "step 3/7"))
			require.Contains(t, out, "step 7/7")

			res, err := readResult(t, dir)
			require.NoError(t, err)
			require.Equal(t, 7, res.StoriesDone)
			require.Equal(t, 7, res.StoriesTotal)
			require.Equal(t, 7, res.Decisions, "a redone step recorded its decision twice")
			require.Equal(t, 2, res.Runs)
			require.Equal(t, int64(7), res.FinalStep)
			require.Equal(t, "step_007.final.json", res.FinalCheckpoint)
			for _, s := range res.Stories {
				require.Equal(t, "done", s.Status, s.ID)
			}

			infos, err := inspect(t, dir).List(context.Background())
			require.NoError(t, err)
			require.NotEmpty(t, infos)
			last := infos[len(infos)-1]
			require.Equal(t, checkpoint.KindFinal, last.Kind)
			require.Equal(t, int64(7), last.Step)
			var numbered []int64
			for _, info := range infos {
				if info.Kind == checkpoint.KindStep {
					numbered = append(numbered, info.Step)
				}
			}
			require.Equal(t, []int64{2, 4, 6}, numbered, "Every(2) numbered checkpoints")
		})
	}
}

// A redone step must not count twice: the sprint state, stats included,
// comes back exactly as it was at the checkpoint.
func TestResumedSprintEqualsUninterruptedSprint(t *testing.T) {
	t.Parallel()
	straight, crashed := t.TempDir(), t.TempDir()
	_, err := orchestrate(t, "-dir", straight)
	require.NoError(t, err)
	_, err = orchestrate(t, "-dir", crashed, "-rolling=false", "-stop-after", "5")
	require.ErrorIs(t, err, errCrash)
	_, err = orchestrate(t, "-dir", crashed, "-rolling=false")
	require.NoError(t, err)

	want, err := readResult(t, straight)
	require.NoError(t, err)
	got, err := readResult(t, crashed)
	require.NoError(t, err)
	require.Equal(t, 1, want.Runs)
	require.Equal(t, 2, got.Runs)
	got.Runs = want.Runs
	require.Equal(t, want, got)
}

func TestCrashAfterFinalCheckpointStillWritesResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := orchestrate(t, "-dir", dir, "-stop-after", "7")
	require.ErrorIs(t, err, errCrash)
	_, err = readResult(t, dir)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)

	out, err := orchestrate(t, "-dir", dir)
	require.NoError(t, err)
	require.Contains(t, out, "already complete (final checkpoint of step 7)")
	require.NotContains(t, out, "step 7/7", "a finished sprint worked again")
	res, err := readResult(t, dir)
	require.NoError(t, err)
	require.Equal(t, 7, res.StoriesDone)
}

func TestBadFlagsAreRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		is   error
	}{
		{"negative interval", []string{"-every", "-1"}, checkpoint.ErrInvalid},
		{"negative stop", []string{"-stop-after", "-1"}, nil},
		{"unknown flag", []string{"-no-such-flag"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := orchestrate(t, append([]string{"-dir", t.TempDir()}, tc.args...)...)
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
		})
	}
}
