package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/stretchr/testify/require"
)

// The kill tests run this test binary as a child process in a role (see
// internal/killtest) that saves in a tight loop, and kill it with SIGKILL.
// CHECKPOINT_KILLS sets how many kills each TestKill9... test makes; default 50
// (15 for sessions).

const (
	crashKeep  = 4
	crashEvery = 30 // KeepEvery of the crash child: these steps stay forever
	crashQueue = 3  // the async child's queue
)

var (
	// crashRole runs crashChild on the directory Args[0] in the crashMode
	// Args[1].
	crashRole = killtest.Register("crash", crashChild)
	// crashSessionsRole runs crashSessionsChild on the root Args[0];
	// Args[1] "backend" makes it open the root with
	// OpenSessionsBackend(dirstore.Open(root)).
	crashSessionsRole = killtest.Register("crash-sessions", crashSessionsChild)
	// errorLoopRole runs errorLoopChild.
	errorLoopRole = killtest.Register("error-loop", errorLoopChild)
	// payloadRole runs payloadChild on the directory Args[0], zstd if
	// Args[1] is "zstd".
	payloadRole = killtest.Register("payload", payloadChild)
)

// A crashMode is how the child saves.
type crashMode string

const (
	crashPlain       crashMode = "plain"
	crashGzip        crashMode = "gzip"
	crashAsyncZstd   crashMode = "async-zstd"
	crashAsyncNoSync crashMode = "async-gzip-nosync"
	// crashStreamedGzip saves states large enough that a gzip save
	// encodes them into the file as it writes it (see
	// format.Codec.Streamed); crashPlain's states are plain ones do.
	crashStreamedGzip crashMode = "streamed-gzip"
)

// streams reports whether the child's saves, after its first, encode their
// state into the file as they write it: its check that they do fails it
// otherwise.
func (m crashMode) streams() bool { return m == crashPlain || m == crashStreamedGzip }

func (m crashMode) async() bool { return m == crashAsyncZstd || m == crashAsyncNoSync }

func TestMain(m *testing.M) {
	killtest.Dispatch()
	os.Exit(m.Run())
}

type crashState struct {
	Step int64  `json:"step"`
	Pad  string `json:"pad"`
}

// resumeStep returns the step a killed child resumes at: the one after
// Latest's, or 1 in an empty store. Any other error of Latest fails it.
func resumeStep[T any](ctx context.Context, s *Store[T], fail func(code int, err error)) int64 {
	_, info, err := s.Latest(ctx)
	if errors.Is(err, ErrNotFound) {
		return 1
	}
	if err != nil {
		fail(3, err)
	}
	return info.Step + 1
}

func newCrashState(step int64) crashState {
	return crashState{Step: step, Pad: strings.Repeat(strconv.FormatInt(step, 36)+"-", 16<<10)}
}

// state is the state the child of mode saves at step: newCrashState's, or
// one of more than 512 KB in crashStreamedGzip.
func (m crashMode) state(step int64) crashState {
	if m == crashStreamedGzip {
		return crashState{Step: step, Pad: strings.Repeat(strconv.FormatInt(step, 36)+"-", 272<<10)}
	}
	return newCrashState(step)
}

func crashOptions(mode crashMode) []Option {
	opts := []Option{WithLayout("c", 6), SaveEvery(3), WithRolling(), KeepLast(crashKeep), KeepMultiplesOf(crashEvery)}
	switch mode {
	case crashGzip, crashStreamedGzip:
		opts = append(opts, Gzip())
	case crashAsyncZstd:
		opts = append(opts, Zstd(), Async(crashQueue))
	case crashAsyncNoSync:
		opts = append(opts, Gzip(), NoSync(), Async(crashQueue))
	}
	return opts
}

// crashChild ticks forever (numbered and rolling checkpoints, pruned by
// KeepLast) in the directory Args[0], saving as crashMode Args[1], saves and
// clears error checkpoints and rewrites a side file, acknowledging each step
// whose saves returned without error (with Async: were queued).
func crashChild(c *killtest.Child) int {
	dir, mode, fail := c.Args[0], crashMode(c.Args[1]), c.Fail
	ctx := context.Background()
	s, err := Open[crashState](dir, crashOptions(mode)...)
	if err != nil {
		fail(2, err)
	}
	next := resumeStep(ctx, s, fail)
	for ; ; next++ {
		st := mode.state(next)
		if _, _, err := s.Tick(ctx, next, st); err != nil {
			fail(4, err)
		}
		if mode.streams() && !s.codec.Streamed(reflect.TypeFor[crashState]()) {
			fail(8, errors.New("a save of a large state is not streamed"))
		}
		if next%7 == 0 {
			if _, err := s.SaveError(ctx, next, st, errors.New("simulated failure")); err != nil {
				fail(5, err)
			}
		}
		if next%7 == 1 && next > 1 {
			// The failed step has been redone: clear its error checkpoint,
			// as a host does after resuming (kills land in Delete too).
			if err := s.ClearError(ctx, next-1); err != nil && !errors.Is(err, ErrNotFound) {
				fail(7, err)
			}
		}
		if next%5 == 0 {
			if err := s.WriteJSON(ctx, "progress.json", map[string]int64{"step": next}); err != nil {
				fail(6, err)
			}
		}
		c.Ack(next)
	}
}

// TestKill9DuringSavesLosesNothing kills a saving process at random instants
// and proves, after every kill, that no checkpoint is torn, that every
// acknowledged save survived, that no temporary file outlives a reopen, that
// the lock of the dead process does not block the restart, and that
// retention still holds.
func TestKill9DuringSavesLosesNothing(t *testing.T) {
	t.Parallel()
	testKill9(t, func(kill int) crashMode { return []crashMode{crashPlain, crashGzip}[kill%2] })
}

// TestKill9AsyncPublishedCheckpointsStayWhole does the same to a process
// saving with Async (zstd; gzip without fsync), and proves that every
// published checkpoint is whole and that a kill loses at most the queued
// saves and the batch being written: the newest checkpoint is at most
// 2*crashQueue steps behind the last step the child queued (each step
// queues one save or more).
func TestKill9AsyncPublishedCheckpointsStayWhole(t *testing.T) {
	t.Parallel()
	testKill9(t, func(kill int) crashMode { return []crashMode{crashAsyncZstd, crashAsyncNoSync}[kill%2] })
}

// TestKill9DuringStreamedGzipSavesLosesNothing does the same to a process
// whose gzip states are large enough to be encoded into the file as it is
// written (TestKill9DuringSavesLosesNothing's plain saves are too), with
// fewer kills by default: each save encodes and compresses half a
// megabyte, slowly under the race detector.
func TestKill9DuringStreamedGzipSavesLosesNothing(t *testing.T) {
	t.Parallel()
	testKill9N(t, 12, func(int) crashMode { return crashStreamedGzip })
}

func testKill9(t *testing.T, modeOf func(kill int) crashMode) { testKill9N(t, 50, modeOf) }

// testKill9N kills a crash child kills times (CHECKPOINT_KILLS overrides)
// in the modes modeOf gives, and checks what each kill left.
func testKill9N(t *testing.T, kills int, modeOf func(kill int) crashMode) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills = killtest.Kills(t, kills)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 42))
	ctx := context.Background()
	midWrite, lastAck, maxLost := 0, int64(0), int64(0)

	for kill := 0; kill < kills; kill++ {
		mode := modeOf(kill)
		p := crashRole.Start(t, dir, string(mode))

		// Let it acknowledge a random number of saves, then kill it while it
		// is busy with the next one.
		want := 1 + rng.IntN(25)
		for _, ack := range p.AwaitAcks(t, want) {
			step, err := strconv.ParseInt(ack, 10, 64)
			require.NoError(t, err, ack)
			require.Greater(t, step, lastAck)
			lastAck = step
		}
		if kill == 0 {
			// The child is a live writer in another process: a second
			// writer is refused, a reader works beside it.
			_, err := Open[crashState](dir, crashOptions(mode)...)
			require.ErrorIs(t, err, ErrLocked)
			require.ErrorContains(t, err, "open it with ReadOnly()")
			if runtime.GOOS == "linux" {
				require.ErrorContains(t, err, fmt.Sprintf("(by process %d)", p.Pid()), "the holder is named")
			}
			r, err := Open[crashState](dir, append(crashOptions(mode), ReadOnly())...)
			require.NoError(t, err)
			_, err = r.List(ctx)
			require.NoError(t, err)
			got, info, err := r.Latest(ctx)
			if !(mode.async() && errors.Is(err, ErrNotFound)) { // async: maybe all still queued
				require.NoError(t, err)
				require.Equal(t, info.Step, got.Step)
			}
			require.NoError(t, r.Close())
		}
		p.Kill(t)
		// The child kept saving while the test was busy (kill 0 does more
		// above): the acks it printed before it died are acknowledged saves
		// too, and the retention checks below count from the last one.
		for _, ack := range p.Acks()[want:] {
			step, err := strconv.ParseInt(ack, 10, 64)
			require.NoError(t, err, ack)
			lastAck = max(lastAck, step)
		}
		require.NotContains(t, p.Stderr(), "checkpoint:", "the child failed before it was killed")

		for _, name := range dirNames(t, dir) {
			if isLeftover(name) {
				midWrite++
				break
			}
		}

		// Restart: the dead child's lock must not block us.
		s, err := Open[crashState](dir, crashOptions(mode)...)
		require.NoError(t, err, "kill %d", kill)
		for _, name := range dirNames(t, dir) {
			require.False(t, isLeftover(name), "temporary file %s survived a reopen", name)
		}
		list, err := s.List(ctx)
		require.NoError(t, err)
		for _, info := range list {
			f, err := os.Open(info.Path)
			require.NoError(t, err)
			env, err := readEnvelope(f, DefaultMaxReadSize)
			f.Close()
			require.NoError(t, err, "kill %d: %s is torn", kill, info.Path)
			require.Equal(t, info.Step, env.Step)
		}
		lost := int64(0)
		if mode.async() {
			lost = 2 * crashQueue // queued, and the batch being written
		}
		got, info, err := s.Latest(ctx)
		if errors.Is(err, ErrNotFound) && lastAck <= lost {
			err = nil // every save was still queued: a fresh start
		}
		require.NoError(t, err)
		require.Equal(t, info.Step, got.Step)
		if info.Step > 0 {
			require.Equal(t, mode.state(info.Step), got)
		}
		require.GreaterOrEqual(t, info.Step, lastAck-lost, "kill %d: lost more than the saves still queued", kill)
		maxLost = max(maxLost, lastAck-info.Step)

		var progress map[string]int64
		if err := s.ReadJSON(ctx, "progress.json", &progress); !errors.Is(err, ErrNotFound) {
			require.NoError(t, err, "the side file is whole")
			require.Positive(t, progress["step"])
		}

		// No kill, even one in the middle of a prune, removed a checkpoint
		// the rules keep: every multiple of crashEvery saved so far, and
		// the newest numbered ones (all but one of KeepLast's: a save
		// published but not acknowledged may have moved the window). Saved
		// so far: up to the last ack, or with Async up to what was published
		// (saves are published in order).
		base := min(lastAck, info.Step)
		numbered := map[int64]bool{}
		for _, info := range list {
			if info.Kind == KindStep {
				numbered[info.Step] = true
			}
		}
		for step := int64(crashEvery); step <= base; step += crashEvery {
			require.True(t, numbered[step], "kill %d: step %d, kept by KeepEvery, is gone", kill, step)
		}
		for i, step := 0, base-base%3; i < crashKeep-1 && step > 0; i, step = i+1, step-3 {
			require.True(t, numbered[step], "kill %d: step %d, kept by KeepLast, is gone", kill, step)
		}

		_, err = s.Prune(ctx)
		require.NoError(t, err)
		list, err = s.List(ctx)
		require.NoError(t, err)
		unkept := 0
		for _, info := range list {
			if info.Kind == KindStep && info.Step%crashEvery != 0 {
				unkept++
			}
		}
		require.LessOrEqual(t, unkept, crashKeep, "retention holds after recovery")
		require.NoError(t, s.Close())
		lastAck = info.Step
	}
	t.Logf("%d kills, %d of them mid-write (a temporary file was left); last step %d; at most %d acknowledged steps lost (allowed: queued ones)", kills, midWrite, lastAck, maxLost)
}

// isLeftover reports whether name is anything but a checkpoint, the side
// file or the lock: after a reopen, nothing else may be in the directory.
func isLeftover(name string) bool {
	return strings.HasPrefix(name, ".") && name != lockName
}

// crashSessionsChild creates sessions in the root Args[0], saves in them
// and forks them in a loop, acknowledging the ID of each session it
// finished.
func crashSessionsChild(c *killtest.Child) int {
	dir, backend, fail := c.Args[0], len(c.Args) > 1 && c.Args[1] == "backend", c.Fail
	ctx := context.Background()
	r, err := OpenSessions(dir)
	if backend {
		r, err = openSessionsDirBackend(dir)
	}
	if err != nil {
		fail(2, err)
	}
	for {
		s, err := r.New(ctx, map[string]string{"kind": "new"})
		if err != nil {
			fail(3, err)
		}
		st, err := OpenSession[crashState](r, s.ID)
		if err != nil {
			fail(4, err)
		}
		for step := int64(1); step <= 3; step++ {
			if _, err := st.Save(ctx, step, newCrashState(step)); err != nil {
				fail(5, err)
			}
		}
		if err := st.Close(); err != nil {
			fail(6, err)
		}
		c.Ack(s.ID)
		if backend {
			c.Printf("forking") // a cue to kill it mid-fork
		}
		f, err := r.Fork(ctx, s.ID, 2, map[string]string{"kind": "fork"})
		if err != nil {
			fail(7, err)
		}
		c.Ack(f.ID)
	}
}

// killSessionsChild starts a sessions child with args, waits for
// 1 + rng.IntN(lines) lines of its output, recording in acked the ID of
// each acknowledgement among them, and kills it.
func killSessionsChild(t *testing.T, rng *rand.Rand, lines int, acked map[string]bool, args ...string) {
	t.Helper()
	p := crashSessionsRole.Start(t, args...)
	want := 1 + rng.IntN(lines)
	for _, line := range p.Await(t, "", want) {
		if id, ok := killtest.Acked(line); ok {
			acked[id] = true
		}
	}
	p.Kill(t)
	require.Empty(t, p.Stderr(), "the child failed before it was killed")
}

// checkSessionsAfterKill checks the root r after the kill numbered kill:
// no session is damaged, each fork holds its two checkpoints and loads at
// step 2, and every session in acked is listed.
func checkSessionsAfterKill(t *testing.T, r *Sessions, kill int, acked map[string]bool) {
	t.Helper()
	ctx := context.Background()
	list, err := r.List(ctx)
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, s := range list {
		require.NoError(t, s.Err, "kill %d: session %s is half-made", kill, s.ID)
		listed[s.ID] = true
		if s.Meta["kind"] == "fork" {
			require.Equal(t, 2, s.Checkpoints, "kill %d: fork %s", kill, s.ID)
			st, err := OpenSession[crashState](r, s.ID, ReadOnly())
			require.NoError(t, err)
			got, info, err := st.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2), info.Step)
			require.Equal(t, newCrashState(2), got)
			require.NoError(t, st.Close())
		}
	}
	for id := range acked {
		require.True(t, listed[id], "kill %d: finished session %s is gone", kill, id)
	}
}

// TestKill9DuringSessionsLeavesNoHalfSession kills a process that creates
// and forks sessions, and proves that every session it finished is there,
// that no half-made session is ever visible, and that the next creation
// cleans up what the dead one left.
func TestKill9DuringSessionsLeavesNoHalfSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
	ctx := context.Background()
	acked := map[string]bool{}
	leftovers := 0
	kills := killtest.Kills(t, 15)
	for kill := 0; kill < kills; kill++ {
		killSessionsChild(t, rng, 6, acked, dir)
		for _, name := range dirNames(t, dir) {
			if strings.HasPrefix(name, stagingPrefix) {
				leftovers++
			}
		}
		r, err := OpenSessions(dir)
		require.NoError(t, err)
		checkSessionsAfterKill(t, r, kill, acked)
		require.NoError(t, r.Close())
	}
	// The next creation removes what a killed one left half-made.
	r, err := OpenSessions(dir)
	require.NoError(t, err)
	_, err = r.New(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	for _, name := range dirNames(t, dir) {
		require.False(t, strings.HasPrefix(name, stagingPrefix), name)
	}
	t.Logf("%d kills, %d sessions finished, %d half-made sessions left in staging and never listed", kills, len(acked), leftovers)
}

// The error-loop kill test runs the README's loop in a child that stops
// after each call of the store (Latest, Tick, SaveError, ClearError,
// SaveFinal), prints what it did and pauses until the test lets it go on;
// the test kills it at each of those points in turn.
const (
	// Step 7 fails: steps 7 and 8 are redone to the rolling file
	// (SaveEvery(3)), so the first pass after the failure is SaveFinal's.
	errorLoopFailAt = 7
	errorLoopLast   = 8
)

// errorLoopSum is the state after steps 1 to step: each step adds itself,
// so a step skipped or played twice shows.
func errorLoopSum(step int64) int64 { return step * (step + 1) / 2 }

func errorLoopOptions() []Option {
	return []Option{WithLayout("e", 4), SaveEvery(3), WithRolling(), NoSync()}
}

// errorLoopChild is the loop of the README's quick-start: resume from
// Latest (redoing a failed step), save an error checkpoint and stop when a
// step fails, Tick after each step, SaveFinal at the end. Its arguments:
// the store's directory, the step that fails (0: none), and "clear" if the
// loop calls ClearError after the redone step.
func errorLoopChild(c *killtest.Child) int {
	dir, clear := c.Args[0], c.Args[2] == "clear"
	ctx := context.Background()
	fail := func(err error) { c.Fail(3, err) }
	point := func(what string, step int64) { c.Pause("%s %d", what, step) }
	failAt, _ := strconv.ParseInt(c.Args[1], 10, 64)
	// A point inside a save (or Close), between publishing a clean
	// checkpoint and removing the error checkpoint it superseded.
	removing := func(op inject.Op) error {
		if op.Kind == inject.Remove && strings.Contains(op.Name, ".error") {
			point("remove-error", errorLoopFailAt)
		}
		return nil
	}
	d, err := openDirWith(dir, errorLoopOptions()...)
	if err != nil {
		fail(err)
	}
	s, err := OpenBackend[int64](inject.Wrap(d, removing), errorLoopOptions()...)
	if err != nil {
		fail(err)
	}
	state, info, err := s.Latest(ctx)
	if errors.Is(err, ErrNotFound) {
		state = 0
	} else if err != nil {
		fail(err)
	}
	point("latest", info.Step)
	if info.Kind == KindFinal {
		// The run is over. Close (deferred in the README's loop) removes
		// an error checkpoint that a kill between SaveFinal's publish and
		// its pass left.
		if err := s.Close(); err != nil {
			fail(err)
		}
		os.Exit(0)
	}
	step := info.Step + 1
	if info.Kind == KindError {
		step = info.Step
	}
	for ; step <= errorLoopLast; step++ {
		if step == failAt {
			if _, err := s.SaveError(ctx, step, state, errors.New("simulated failure")); err != nil {
				fail(err)
			}
			point("save-error", step)
			os.Exit(1)
		}
		state += step
		if _, _, err := s.Tick(ctx, step, state); err != nil {
			fail(err)
		}
		point("tick", step)
		if clear && info.Kind == KindError && step == info.Step {
			if err := s.ClearError(ctx, step); err != nil {
				fail(err)
			}
			point("clear-error", step)
		}
	}
	if _, err := s.SaveFinal(ctx, errorLoopLast, state); err != nil {
		fail(err)
	}
	point("final", errorLoopLast)
	if err := s.Close(); err != nil {
		fail(err)
	}
	return 0
}

// TestKill9InTheErrorLoopLeavesNoErrorCheckpointBehind kills the README's
// loop with SIGKILL at every point between its calls (after Latest, each
// Tick, SaveError, ClearError and SaveFinal) and inside a save or
// ClearError, just before the error checkpoint's removal (SaveFinal's
// checkpoint is then published, and the next run saves nothing: only its
// Close can remove it), in a run whose step 7 fails and in the run that
// resumes, with and without a ClearError after the redone step. After each kill it proves that the failure is never lost nor
// resumed past (Latest is the error checkpoint, or a clean checkpoint saved
// after it, holding the right state), that once a numbered checkpoint after
// the redone step is saved no error checkpoint is left, and, after the loop
// is run again to its end, that the final state counts every step once and
// no error checkpoint is left.
func TestKill9InTheErrorLoopLeavesNoErrorCheckpointBehind(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx := context.Background()
	// run runs one child to its end, answering each of its points, and
	// returns them; with killAt > 0, it kills the child when it reaches
	// its killAt-th point (counted by *seen) instead.
	run := func(dir, clear string, failAt int64, seen *int, killAt int) (points []string, killed bool) {
		arg := ""
		if clear != "" {
			arg = "clear"
		}
		p := errorLoopRole.Start(t, dir, strconv.FormatInt(failAt, 10), arg)
		for {
			point, ok := p.Next(t)
			if !ok {
				break
			}
			points = append(points, point)
			*seen++
			if *seen == killAt {
				p.Kill(t)
				return points, true
			}
			p.Resume(t)
		}
		err := p.Wait()
		require.Empty(t, p.Stderr(), "the child failed")
		if failAt > 0 && len(points) > 0 && strings.HasPrefix(points[len(points)-1], "save-error") {
			require.Error(t, err, "the loop stops after SaveError")
		} else {
			require.NoError(t, err)
		}
		return points, false
	}
	// check proves the invariants of a store killed after points.
	check := func(dir string, clear bool, points []string) {
		t.Helper()
		r, err := Open[int64](dir, append(errorLoopOptions(), ReadOnly())...)
		require.NoError(t, err)
		defer r.Close()
		list, err := r.List(ctx)
		require.NoError(t, err)
		failed := slices.ContainsFunc(points, func(p string) bool { return strings.HasPrefix(p, "save-error") })
		var errorAt *Info
		for i, info := range list {
			if info.Kind == KindError {
				require.Equal(t, int64(errorLoopFailAt), info.Step, "%v", points)
				errorAt = &list[i]
			}
		}
		numberedAfter := slices.ContainsFunc(list, func(i Info) bool { return i.Kind == KindStep && i.Step > errorLoopFailAt })
		if errorAt != nil {
			require.False(t, numberedAfter, "after %v: %s is left beside a numbered checkpoint after it", points, errorAt.Path)
		}
		v, info, err := r.Latest(ctx)
		if failed {
			// A ClearError removes the record as soon as the redone step
			// is saved (to the rolling file); without it, the record stays
			// until the next retention pass.
			redone := err == nil && info.Kind != KindError && info.Step >= errorLoopFailAt
			final := slices.ContainsFunc(list, func(i Info) bool { return i.Kind == KindFinal })
			require.True(t, errorAt != nil || numberedAfter || final || clear && redone,
				"after %v: the failure is lost before a clean checkpoint superseded it", points)
		}
		if len(list) == 0 {
			require.ErrorIs(t, err, ErrNotFound)
			return
		}
		require.NoError(t, err)
		if info.Kind == KindError {
			require.Equal(t, errorLoopSum(info.Step-1), v, "the error checkpoint holds the state before the failed step")
			return
		}
		require.Equal(t, errorLoopSum(info.Step), v, "after %v: Latest %s", points, info.Path)
		if errorAt != nil {
			require.True(t, info.Time.After(errorAt.Time), "after %v: Latest %s resumes past the error checkpoint without superseding it", points, info.Path)
		}
	}
	for _, clear := range []string{"", "with ClearError"} {
		// The points of an uninterrupted pair of runs: the one that fails,
		// and the one that resumes and finishes.
		total := 0
		p1, _ := run(t.TempDir(), clear, errorLoopFailAt, &total, 0)
		dir := t.TempDir()
		run(dir, clear, errorLoopFailAt, new(int), 0)
		p2, _ := run(dir, clear, 0, &total, 0)
		require.Contains(t, p2, "tick 7", "the failed step is redone")
		if clear != "" {
			require.Contains(t, p2, "clear-error 7")
		}
		check(dir, clear != "", slices.Concat(p1, p2))
		t.Logf("%q: %d kill points", clear, total)
		for killAt := 1; killAt <= total; killAt++ {
			dir := t.TempDir()
			seen := 0
			points, killed := run(dir, clear, errorLoopFailAt, &seen, killAt)
			failed := slices.ContainsFunc(points, func(p string) bool { return strings.HasPrefix(p, "save-error") })
			if !killed {
				more, _ := run(dir, clear, 0, &seen, killAt)
				points = append(points, more...)
			}
			check(dir, clear != "", points)
			// Run the loop again to its end: a run killed before step 7
			// failed fails there now.
			failAt := int64(0)
			if !failed {
				failAt = errorLoopFailAt
				run(dir, clear, failAt, new(int), 0)
			}
			rest, _ := run(dir, clear, 0, new(int), 0)
			r := openStore[int64](t, dir, append(errorLoopOptions(), ReadOnly())...)
			v, info, err := r.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, KindFinal, info.Kind, "%s, killed after %v, then %v", clear, points, rest)
			require.Equal(t, errorLoopSum(errorLoopLast), v, "every step counted once")
			list, err := r.List(ctx)
			require.NoError(t, err)
			for _, info := range list {
				require.NotEqual(t, KindError, info.Kind, "%s, killed after %v, then %v: %s is left", clear, points, rest, info.Path)
			}
		}
	}
}

// openSessionsDirBackend opens the root of sessions dir through
// OpenSessionsBackend on the directory's Backend.
func openSessionsDirBackend(dir string, opts ...Option) (*Sessions, error) {
	b, err := openDirWith(dir, opts...)
	if err != nil {
		return nil, err
	}
	return OpenSessionsBackend(b, opts...)
}

// TestKill9DuringSessionsOnABackendLeavesNoHalfSession kills a process
// that creates and forks sessions through OpenSessionsBackend, and proves
// that every session it finished is there and whole, that no half-made
// session is ever listed, and that RemoveStaging then removes what the
// dead forks left.
func TestKill9DuringSessionsOnABackendLeavesNoHalfSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 11))
	ctx := context.Background()
	acked := map[string]bool{}
	kills := killtest.Kills(t, 15)
	for kill := 0; kill < kills; kill++ {
		// The child acknowledges each session it finished and says
		// "forking" before each fork: killing it after a line chosen at
		// random kills it now and then mid-fork.
		killSessionsChild(t, rng, 9, acked, dir, "backend")
		r, err := openSessionsDirBackend(dir)
		require.NoError(t, err)
		checkSessionsAfterKill(t, r, kill, acked)
		require.NoError(t, r.Close())
	}

	// What a killed fork left is out of sight; RemoveStaging removes it,
	// and leaves every listed session as it was.
	r, err := openSessionsDirBackend(dir)
	require.NoError(t, err)
	defer r.Close()
	before, err := r.List(ctx)
	require.NoError(t, err)
	removed, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	after, err := r.List(ctx)
	require.NoError(t, err)
	require.Equal(t, before, after)
	ids, err := r.b.Children(ctx)
	require.NoError(t, err)
	for _, id := range ids {
		sub, err := r.b.Sub(ctx, id, false)
		require.NoError(t, err)
		_, _, metaErr := readMetaIn(ctx, sub, id)
		if errors.Is(metaErr, ErrNotFound) { // not a session
			_, statErr := sub.Stat(ctx, sessionFile)
			c, claimErr := readClaim(ctx, sub)
			switch {
			case statErr == nil:
				require.Equal(t, []string{sessionFile}, objectNamesIn(t, sub), "%s: only its tombstone stays", id)
			case claimErr == nil:
				require.NotEqual(t, claimFork, c.Op, "%s: a dead fork's checkpoints are left after RemoveStaging", id)
			}
		}
		require.NoError(t, sub.Close())
	}
	t.Logf("%d kills, %d sessions finished, %d half-made forks removed", kills, len(acked), len(removed))
}

// objectNamesIn returns the names of the objects in b.
func objectNamesIn(t *testing.T, b Backend) []string {
	t.Helper()
	objs, err := b.List(context.Background())
	require.NoError(t, err)
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	return names
}

// killPayload is the byte payload of step in the payload kill test: its
// size and bytes depend on the step, so that a payload of another step, or
// torn, cannot pass for it.
func killPayload(step int64) []byte {
	rng := rand.New(rand.NewPCG(uint64(step), 99))
	b := make([]byte, 1+rng.IntN(300<<10))
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}

func payloadOptions(zstd bool) []Option {
	opts := []Option{WithLayout("p", 6), KeepLast(crashKeep)}
	if zstd {
		opts = append(opts, Zstd())
	}
	return opts
}

// payloadChild saves byte payloads forever (SaveFrom, in pieces of 4 KiB,
// pruned by KeepLast) from the step after the newest, acknowledging each
// step whose save returned.
func payloadChild(c *killtest.Child) int {
	dir, zstd, fail := c.Args[0], c.Args[1] == "zstd", c.Fail
	ctx := context.Background()
	s, err := Open[[]byte](dir, payloadOptions(zstd)...)
	if err != nil {
		fail(2, err)
	}
	list, err := s.List(ctx)
	if err != nil {
		fail(3, err)
	}
	next := int64(1)
	if len(list) > 0 {
		next = list[len(list)-1].Step + 1
	}
	for ; ; next++ {
		if _, err := s.SaveFrom(ctx, next, func(w io.Writer) error {
			p := killPayload(next)
			for len(p) > 0 {
				n := min(len(p), 4<<10)
				if _, err := w.Write(p[:n]); err != nil {
					return err
				}
				p = p[n:]
			}
			return nil
		}); err != nil {
			fail(5, err)
		}
		c.Ack(next)
	}
}

// TestKill9DuringPayloadSavesLosesNothing kills a process saving byte
// payloads (plain and zstd) at random instants and proves, after every
// kill, that every checkpoint listed verifies and holds its step's bytes,
// that the last acknowledged payload survived, and that no temporary file
// outlives a reopen.
func TestKill9DuringPayloadSavesLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := killtest.Kills(t, 15)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 24))
	ctx := context.Background()
	lastAck := int64(0)
	for kill := 0; kill < kills; kill++ {
		zstd := kill%2 == 1
		mode := "plain"
		if zstd {
			mode = "zstd"
		}
		p := payloadRole.Start(t, dir, mode)
		want := 1 + rng.IntN(10)
		for _, ack := range p.AwaitAcks(t, want) {
			step, err := strconv.ParseInt(ack, 10, 64)
			require.NoError(t, err, ack)
			lastAck = max(lastAck, step)
		}
		p.Kill(t)
		for _, ack := range p.Acks()[want:] {
			step, err := strconv.ParseInt(ack, 10, 64)
			require.NoError(t, err, ack)
			lastAck = max(lastAck, step)
		}
		require.NotContains(t, p.Stderr(), "checkpoint:", "the child failed before it was killed")

		s, err := Open[[]byte](dir, payloadOptions(zstd)...)
		require.NoError(t, err, "kill %d", kill)
		for _, name := range dirNames(t, dir) {
			require.False(t, isLeftover(name), "temporary file %s survived a reopen", name)
		}
		list, err := s.List(ctx)
		require.NoError(t, err)
		steps := map[int64]bool{}
		for _, info := range list {
			steps[info.Step] = true
			r, _, err := s.OpenPayloadExact(ctx, info)
			require.NoError(t, err, "kill %d: %s", kill, info.Location)
			got, err := io.ReadAll(r)
			r.Close()
			require.NoError(t, err, "kill %d: %s is torn", kill, info.Location)
			require.True(t, bytes.Equal(killPayload(info.Step), got), "kill %d: %s holds other bytes", kill, info.Location)
		}
		require.True(t, steps[lastAck], "kill %d: the acknowledged payload of step %d is gone", kill, lastAck)
		require.NoError(t, s.Close())
	}
}
