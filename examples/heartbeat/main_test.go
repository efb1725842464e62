package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// daemonRole runs the daemon with Args as its arguments in a child process
// of the test binary: the kill tests need a real process to kill.
var daemonRole = killtest.Register("heartbeat", func(c *killtest.Child) int { return daemon(c.Args) })

func TestMain(m *testing.M) {
	killtest.Dispatch()
	os.Exit(m.Run())
}

var (
	createdRe  = regexp.MustCompile(`^checkpoint created beat=(\d+) size=(\d+) kind=(\w+)$`)
	restoredRe = regexp.MustCompile(`(?m)^checkpoint restored beat=(\d+) age=\S+ kind=(\w+)$`)
)

// daemonProcess is the daemon running as a child process.
type daemonProcess struct {
	*killtest.Proc
}

func startDaemon(t *testing.T, args ...string) *daemonProcess {
	t.Helper()
	return &daemonProcess{daemonRole.Start(t, args...)}
}

// waitForSaves reads the daemon's output until it has reported n step
// checkpoints and returns the highest beat saved.
func (d *daemonProcess) waitForSaves(t *testing.T, n int) int64 {
	t.Helper()
	var last int64
	for seen := 0; seen < n; {
		line, ok := d.Next(t)
		if !ok {
			t.Fatalf("daemon stopped before %d checkpoints: %v\nstderr:\n%s", n, d.Wait(), d.Stderr())
		}
		t.Logf("daemon: %s", line)
		m := createdRe.FindStringSubmatch(line)
		if m == nil || m[3] != string(checkpoint.KindStep) {
			continue
		}
		beat, err := strconv.ParseInt(m[1], 10, 64)
		require.NoError(t, err)
		require.Greater(t, beat, last, "checkpoints are reported in beat order")
		last = beat
		seen++
	}
	return last
}

// drainSaves reads the daemon's output to its end and returns the highest
// beat saved in a step checkpoint, last if none is reported.
func (d *daemonProcess) drainSaves(t *testing.T, last int64) int64 {
	t.Helper()
	for line, ok := d.Next(t); ok; line, ok = d.Next(t) {
		m := createdRe.FindStringSubmatch(line)
		if m == nil || m[3] != string(checkpoint.KindStep) {
			continue
		}
		beat, err := strconv.ParseInt(m[1], 10, 64)
		require.NoError(t, err)
		last = max(last, beat)
	}
	return last
}

// restoredBeat returns the beat of the "checkpoint restored" event in out.
func restoredBeat(t *testing.T, out string) (int64, checkpoint.Kind) {
	t.Helper()
	m := restoredRe.FindStringSubmatch(out)
	require.NotNil(t, m, "no restore event in output:\n%s", out)
	beat, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return beat, checkpoint.Kind(m[2])
}

func runDaemon(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), args, &out))
	return out.String()
}

func openReadOnly(t *testing.T, dir string) *checkpoint.Store[State] {
	t.Helper()
	store, err := checkpoint.Open[State](dir, checkpoint.WithLayout("beat", 8), checkpoint.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store
}

// TestKilledDaemonResumesFromItsLastReportedCheckpoint kills the daemon
// with SIGKILL, which no program can catch, and proves the next run resumes
// from the last checkpoint it reported, with its whole state.
func TestKilledDaemonResumesFromItsLastReportedCheckpoint(t *testing.T) {
	t.Parallel()
	t.Run("sync", func(t *testing.T) { testKilledDaemonResumes(t) })
	// With -async, "created" is printed once a checkpoint is published
	// and durable, so the same promise holds; a kill in the middle of a
	// batch may leave later saves of it published but not yet reported,
	// and the run resumes from the newest of them, never an older one.
	t.Run("async", func(t *testing.T) { testKilledDaemonResumes(t, "-async") })
}

func testKilledDaemonResumes(t *testing.T, flags ...string) {
	dir := t.TempDir()
	d := startDaemon(t, append([]string{"-dir", dir, "-beats", "0", "-interval", "0"}, flags...)...)
	lastSaved := d.waitForSaves(t, 3)
	err := d.Kill(t)
	// The daemon may have saved more before the kill landed: read what it
	// printed before it died.
	lastSaved = d.drainSaves(t, lastSaved)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the daemon must die of the kill, not exit on its own")
	if runtime.GOOS != "windows" {
		require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
	}

	// The newest checkpoint there is: the last one reported, or one
	// published since, which the kill kept it from reporting.
	newest := lastSaved
	func() {
		store := openReadOnly(t, dir)
		_, info, err := store.Latest(t.Context())
		require.NoError(t, err)
		newest = max(newest, info.Step)
		store.Close()
	}()
	target := newest + 60
	out := runDaemon(t, append([]string{"-dir", dir, "-beats", strconv.FormatInt(target, 10), "-interval", "0"}, flags...)...)
	t.Logf("second run:\n%s", out)
	restored, kind := restoredBeat(t, out)
	// A save may have completed between the line we read and the kill.
	require.GreaterOrEqual(t, restored, lastSaved)
	require.Equal(t, newest, restored)
	require.Equal(t, checkpoint.KindStep, kind)
	require.Zero(t, restored%every, "step checkpoints are taken every %d beats", every)
	require.Contains(t, out, "resuming at beat "+strconv.FormatInt(restored, 10))
	require.Contains(t, out, "stopped at beat "+strconv.FormatInt(target, 10))

	store := openReadOnly(t, dir)
	ctx := t.Context()
	infos, err := store.List(ctx)
	require.NoError(t, err)
	steps := 0
	for _, info := range infos {
		if info.Kind == checkpoint.KindStep {
			steps++
		}
		require.Equal(t, "gzip", info.Compression, "%s", info.Name())
		_, _, err := store.Load(ctx, info.Step)
		require.NoError(t, err, "%s", info.Name())
	}
	require.LessOrEqual(t, steps, keep)
	require.GreaterOrEqual(t, steps, 3)

	final, info, err := store.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindFinal, info.Kind)
	require.Equal(t, target, final.Beat)

	// An uninterrupted run to the same beat ends in the same state: the
	// affect, working memory and goals were all restored, not just the beat.
	fresh := t.TempDir()
	runDaemon(t, "-dir", fresh, "-beats", strconv.FormatInt(target, 10), "-interval", "0")
	want, _, err := openReadOnly(t, fresh).Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, want, final)
}

// TestSIGTERMSavesBeatInHand proves a signalled daemon saves the beat it
// reached, between two intervals, as an ordinary checkpoint (a stop is not
// the end of a daemon's run), and exits cleanly.
func TestSIGTERMSavesBeatInHand(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on Windows")
	}
	dir := t.TempDir()
	d := startDaemon(t, "-dir", dir, "-interval", "1ms")
	lastSaved := d.waitForSaves(t, 1)
	require.NoError(t, d.Signal(syscall.SIGTERM))
	err := d.Wait()
	require.NoError(t, err, "stderr:\n%s", d.Stderr())
	var rest []string
	for line, ok := d.Next(t); ok; line, ok = d.Next(t) {
		rest = append(rest, line)
	}
	t.Logf("daemon after SIGTERM:\n%s", strings.Join(rest, "\n"))

	m := regexp.MustCompile(`(?m)^stopped at beat (\d+)$`).FindStringSubmatch(strings.Join(rest, "\n"))
	require.NotNil(t, m, "the daemon did not report its stop")
	beat, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, beat, lastSaved)

	state, info, err := openReadOnly(t, dir).Latest(t.Context())
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindStep, info.Kind)
	require.Equal(t, beat, info.Step)
	require.Equal(t, beat, state.Beat)

	out := runDaemon(t, "-dir", dir, "-beats", strconv.FormatInt(beat+1, 10), "-interval", "0")
	restored, kind := restoredBeat(t, out)
	require.Equal(t, beat, restored)
	require.Equal(t, checkpoint.KindStep, kind)
}

// TestFreshStartAndTargetReached covers the plain run: a fresh store,
// checkpoints every 50 beats, retention at 10, and a second run with nothing
// left to do.
func TestFreshStartAndTargetReached(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := runDaemon(t, "-dir", dir, "-beats", "600", "-interval", "0")
	require.Contains(t, out, "fresh start in "+dir)
	require.NotContains(t, out, "checkpoint restored")
	require.Contains(t, out, "checkpoint created beat=600 size=")
	require.Contains(t, out, "checkpoint pruned beat=50\n")

	infos, err := openReadOnly(t, dir).List(t.Context())
	require.NoError(t, err)
	var steps []int64
	for _, info := range infos {
		if info.Kind == checkpoint.KindStep {
			steps = append(steps, info.Step)
		}
	}
	require.Equal(t, []int64{150, 200, 250, 300, 350, 400, 450, 500, 550, 600}, steps)

	out = runDaemon(t, "-dir", dir, "-beats", "600", "-interval", "0")
	require.Contains(t, out, "stopped at beat 600; nothing new to save")
}

// cancelOn cancels a context when a line containing marker is written.
type cancelOn struct {
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if bytes.Contains(p, []byte(c.marker)) {
		c.cancel()
	}
	return len(p), nil
}

// TestStopOnSavedBeat covers a stop that lands on a beat Tick has just
// saved: nothing more to save, and a clean exit.
func TestStopOnSavedBeat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	out := &cancelOn{marker: "checkpoint created beat=50 ", cancel: cancel}
	require.NoError(t, run(ctx, []string{"-dir", dir, "-interval", "0"}, out))
	require.Contains(t, out.buf.String(), "stopped at beat 50\n")
	infos, err := openReadOnly(t, dir).List(t.Context())
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, int64(50), infos[0].Step)
}

// TestStopCancelsDueBeat covers a signal that cancels the Tick of a due
// beat: the beat is still saved on the way out.
func TestStopCancelsDueBeat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	// The status line of beat 100 is printed just before its Tick.
	out := &cancelOn{marker: "beat 100: ", cancel: cancel}
	require.NoError(t, run(ctx, []string{"-dir", dir, "-interval", "0"}, out))
	require.Contains(t, out.buf.String(), "stopped at beat 100\n")
	state, info, err := openReadOnly(t, dir).Latest(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(100), info.Step)
	require.Equal(t, int64(100), state.Beat)
}
