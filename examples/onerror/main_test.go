package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// runWorkflow runs the program in-process and returns its output, the value
// it panicked with, if it did, and its error.
func runWorkflow(t *testing.T, dir string, args ...string) (out string, panicked any, err error) {
	t.Helper()
	var buf bytes.Buffer
	defer func() {
		panicked = recover()
		out = buf.String()
		t.Logf("run %v:\n%s", args, out)
	}()
	err = run(t.Context(), append([]string{"-dir", dir, "-delay", "0"}, args...), &buf)
	return
}

// inspect opens dir read-only, as a tool beside the workflow would.
func inspect(t *testing.T, dir string) *checkpoint.Store[State] {
	t.Helper()
	store, err := openStore(dir, checkpoint.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store
}

func kinds(t *testing.T, store *checkpoint.Store[State]) map[checkpoint.Kind]int {
	t.Helper()
	infos, err := store.List(t.Context())
	require.NoError(t, err)
	n := make(map[checkpoint.Kind]int)
	for _, info := range infos {
		n[info.Kind]++
	}
	return n
}

// cleanOutputs is what a workflow that never failed produces.
func cleanOutputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	_, p, err := runWorkflow(t, dir)
	require.NoError(t, err)
	require.Nil(t, p)
	state, _, err := inspect(t, dir).Latest(t.Context())
	require.NoError(t, err)
	return state.Outputs
}

// requireResumedAndComplete checks a run that resumed from the error
// checkpoint of step failed and finished the workflow.
func requireResumedAndComplete(t *testing.T, dir, failed, out string) {
	t.Helper()
	require.Contains(t, out, `resuming step "`+failed+`" from part 3 of 4`)
	// The redone step's save removed the error checkpoint it superseded.
	require.Regexp(t, `the store removed step_0\d\.error(-\d)?\.json: the redone step's checkpoint superseded it`, out)
	require.NotContains(t, out, "cleared")
	require.Contains(t, out, "workflow complete:")

	store := inspect(t, dir)
	require.Zero(t, kinds(t, store)[checkpoint.KindError], "no error checkpoint may remain")
	state, info, err := store.Latest(t.Context())
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindFinal, info.Kind)
	require.Equal(t, int64(len(steps)), info.Step)
	require.Empty(t, state.Partial)
	require.Equal(t, len(steps), state.Current)
	// Resuming from the partial output neither lost nor repeated a part.
	require.Equal(t, cleanOutputs(t), state.Outputs)
}

func TestFailureSavesErrorCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, p, err := runWorkflow(t, dir, "-fail-at", "build")
	require.Nil(t, p)
	require.ErrorIs(t, err, errInjected)
	require.Contains(t, out, `step "build" failed; saved step_03.error.json`)

	state, info, err := inspect(t, dir).Latest(t.Context())
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, info.Kind)
	require.Equal(t, int64(3), info.Step)
	require.Equal(t, 2, state.Current)
	require.Len(t, state.Outputs, 2)
	require.Contains(t, state.Outputs, "brief")
	require.Contains(t, state.Outputs, "design")
	require.Equal(t, "build part 1/4, based on brief, design\nbuild part 2/4, based on brief, design\n", state.Partial)

	rec := info.Error
	require.NotNil(t, rec)
	require.Contains(t, rec.Message, "toolchain crashed")
	require.Contains(t, rec.Message, "build")
	require.Equal(t, []string{"*fmt.wrapError", "*errors.errorString"}, rec.Types)
	require.Equal(t, int64(3), rec.Step)
	require.False(t, rec.Time.IsZero())
	require.False(t, rec.Panic)
	require.Empty(t, rec.Stack)
}

func TestResumeFromErrorCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, _, err := runWorkflow(t, dir, "-fail-at", "build")
	require.ErrorIs(t, err, errInjected)

	out, p, err := runWorkflow(t, dir)
	require.NoError(t, err)
	require.Nil(t, p)
	require.Contains(t, out, `the last run failed at step "build"`)
	require.Contains(t, out, "build: writing part 3: toolchain crashed")
	require.Contains(t, out, "    | build part 2/4")
	requireResumedAndComplete(t, dir, "build", out)

	out, _, err = runWorkflow(t, dir)
	require.NoError(t, err)
	require.Contains(t, out, "the workflow is complete (step_05.final.json)")
}

func TestPanicSavesErrorCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, p, err := runWorkflow(t, dir, "-panic-at", "test")
	require.NoError(t, err)
	require.Equal(t, "test: out of memory writing part 3", p, "SaveOnPanic must panic again with the same value")

	state, info, err := inspect(t, dir).Latest(t.Context())
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, info.Kind)
	require.Equal(t, int64(4), info.Step)
	require.Len(t, state.Outputs, 3)
	require.Equal(t, "test part 1/4, based on brief, design, build\ntest part 2/4, based on brief, design, build\n", state.Partial)
	rec := info.Error
	require.NotNil(t, rec)
	require.True(t, rec.Panic)
	require.Equal(t, "test: out of memory writing part 3", rec.Message)
	require.Contains(t, rec.Stack, "onerror.work", "the stack shows where the step panicked")

	// The panicking run closed its store: the next one can take the lock.
	out, p, err := runWorkflow(t, dir)
	require.NoError(t, err)
	require.Nil(t, p)
	require.Contains(t, out, `the last run panicked at step "test"`)
	require.Contains(t, out, "stack: ")
	requireResumedAndComplete(t, dir, "test", out)
}

// TestRepeatedFailureKeepsEveryAttempt fails the same step twice: the second
// failure is a second error checkpoint, resumed from the same partial output,
// and the redone step's save removes both.
func TestRepeatedFailureKeepsEveryAttempt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, _, err := runWorkflow(t, dir, "-fail-at", "design")
	require.ErrorIs(t, err, errInjected)
	out, _, err := runWorkflow(t, dir, "-fail-at", "design")
	require.ErrorIs(t, err, errInjected)
	require.Contains(t, out, `step "design" failed; saved step_02.error-2.json`)
	require.Equal(t, 2, kinds(t, inspect(t, dir))[checkpoint.KindError])

	out, _, err = runWorkflow(t, dir)
	require.NoError(t, err)
	requireResumedAndComplete(t, dir, "design", out)
}

// cancelOn is the program's stdout that cancels the run, as SIGINT would,
// when the program prints line.
type cancelOn struct {
	bytes.Buffer
	line   string
	cancel context.CancelFunc
}

func (w *cancelOn) Write(p []byte) (int, error) {
	if string(p) == w.line {
		w.cancel()
	}
	return w.Buffer.Write(p)
}

// TestInterruptSavesErrorCheckpoint interrupts a step midway and checks the
// work so far is saved although ctx is done.
func TestInterruptSavesErrorCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &cancelOn{line: "design: wrote part 1/4\n", cancel: cancel}
	err := run(ctx, []string{"-dir", dir, "-delay", "0"}, out)
	t.Logf("interrupted run:\n%s", out.String())
	require.ErrorIs(t, err, context.Canceled)

	state, info, err := inspect(t, dir).Latest(t.Context())
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, info.Kind)
	require.Equal(t, int64(2), info.Step)
	require.Contains(t, info.Error.Message, "context canceled")
	require.Equal(t, "design part 1/4, based on brief\n", state.Partial)

	out2, p, err := runWorkflow(t, dir)
	require.NoError(t, err)
	require.Nil(t, p)
	require.Contains(t, out2, `resuming step "design" from part 2 of 4`)
}

func TestUnknownStep(t *testing.T) {
	t.Parallel()
	_, _, err := runWorkflow(t, t.TempDir(), "-fail-at", "deploy")
	require.ErrorContains(t, err, `unknown step "deploy"`)
}
