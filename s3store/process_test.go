package s3store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// The tests below run writers as child processes: the test binary itself,
// with envChild naming what it does (runChild). A child prints one line
// per event on stdout: "locked", "ok STEP", "err STEP MESSAGE", "close
// MESSAGE".
const (
	envChild  = "S3STORE_CHILD"  // "saver" or "contender"
	envBucket = "S3STORE_BUCKET" // the bucket; the prefix is "run"
	envWriter = "S3STORE_WRITER" // the writer's name, saved in its states
	envRounds = "S3STORE_ROUNDS" // contender: how many times it takes the lease
	// envUnguarded set to 1 turns off the saver's own lease checks (see
	// Backend.unguarded).
	envUnguarded = "S3STORE_UNGUARDED"
	childTTL     = testTTL
)

func runChild() int {
	s := server{endpoint: os.Getenv(envEndpoint), key: os.Getenv(envKey), secret: os.Getenv(envSecret)}
	client := s.client(&counter{rt: http0()})
	bucket, writer := os.Getenv(envBucket), os.Getenv(envWriter)
	open := func() *checkpoint.Store[state] {
		for deadline := time.Now().Add(60 * time.Second); ; {
			b, err := New(client, bucket, "run", LeaseTTL(childTTL))
			if err != nil {
				fmt.Println("close", err)
				os.Exit(2)
			}
			b.unguarded = os.Getenv(envUnguarded) == "1"
			st, err := checkpoint.OpenBackend[state](b)
			if err == nil {
				fmt.Println("locked")
				return st
			}
			if !errors.Is(err, checkpoint.ErrLocked) || time.Now().After(deadline) {
				fmt.Println("close", err)
				os.Exit(2)
			}
		}
	}
	next := func(st *checkpoint.Store[state]) int64 {
		_, info, err := st.Latest(context.Background())
		if errors.Is(err, checkpoint.ErrNotFound) {
			return 1
		}
		if err != nil {
			fmt.Println("close", err)
			os.Exit(2)
		}
		return info.Step + 1
	}
	ctx := context.Background()
	switch os.Getenv(envChild) {
	case "saver":
		// Saves step after step until stdin ends (or it is killed).
		st := open()
		stop := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
		for step := next(st); ; step++ {
			select {
			case <-stop:
				err := st.Close()
				fmt.Println("close", errors.Is(err, checkpoint.ErrLocked), err)
				return 0
			default:
			}
			if _, err := st.Save(ctx, step, state{Writer: writer, Step: step, Pad: strings.Repeat("x", 2000)}); err != nil {
				fmt.Println("err", step, errors.Is(err, checkpoint.ErrLocked), strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				fmt.Println("ok", step)
			}
		}
	case "contender":
		rounds, _ := strconv.Atoi(os.Getenv(envRounds))
		for range rounds {
			st := open()
			for step, end := next(st), int64(0); ; step++ {
				if end == 0 {
					end = step + 3
				}
				if step == end {
					break
				}
				if _, err := st.Save(ctx, step, state{Writer: writer, Step: step}); err != nil {
					fmt.Println("err", step, errors.Is(err, checkpoint.ErrLocked), err)
					return 1
				}
				fmt.Println("ok", step)
			}
			if err := st.Close(); err != nil {
				fmt.Println("close", err)
				return 1
			}
		}
		return 0
	}
	return 2
}

// child is a writer process and the lines it printed.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	lines []string
	more  chan struct{} // signalled on each line
	done  chan struct{} // closed when stdout ends
}

func startChild(t *testing.T, f *fixture, role, writer string, extra ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"="+role, envBucket+"="+f.bucket, envWriter+"="+writer,
		envEndpoint+"="+f.srv.endpoint, envKey+"="+f.srv.key, envSecret+"="+f.srv.secret)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		_ = cmd.Wait()
	})
	return c
}

// waitFor waits until the child has printed n lines starting with prefix.
func (c *child) waitFor(t *testing.T, prefix string, n int, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		if c.count(prefix) >= n {
			return
		}
		select {
		case <-c.more:
		case <-c.done:
			if c.count(prefix) >= n {
				return
			}
			t.Fatalf("child exited having printed %d %q lines, want %d: %q", c.count(prefix), prefix, n, c.output())
		case <-timeout:
			t.Fatalf("child printed %d %q lines in %v, want %d: %q", c.count(prefix), prefix, d, n, c.output())
		}
	}
}

func (c *child) output() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

func (c *child) count(prefix string) int {
	n := 0
	for _, l := range c.output() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func lineStep(t *testing.T, line string) int64 {
	f := strings.Fields(line)
	step, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err, line)
	return step
}

// takeStore opens the store as its writer, waiting for a dead writer's
// lease to expire.
func takeStore(t *testing.T, f *fixture) *checkpoint.Store[state] {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err := openStore(t, f, "run")
		if err == nil {
			return st
		}
		require.ErrorIs(t, err, checkpoint.ErrLocked)
		require.True(t, time.Now().Before(deadline), "no lease in 30s: %v", err)
		time.Sleep(50 * time.Millisecond) // polling for the lease to expire
	}
}

// verifyAll loads every listed checkpoint and returns the listed steps.
func verifyAll(t *testing.T, st *checkpoint.Store[state]) []int64 {
	t.Helper()
	ctx := context.Background()
	infos, err := st.List(ctx)
	require.NoError(t, err)
	var steps []int64
	for _, in := range infos {
		got, _, err := st.Load(ctx, in.Step)
		require.NoError(t, err, "listed step %d does not load", in.Step)
		require.Equal(t, in.Step, got.Step)
		steps = append(steps, in.Step)
	}
	return steps
}

func TestKilledWriterOnS3LosesNoAcknowledgedSave(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes; several lease TTLs")
	}
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lastAcked := int64(0)
	for round := range 3 {
		c := startChild(t, f, "saver", fmt.Sprintf("w%d", round))
		c.waitFor(t, "locked", 1, 60*time.Second)
		// A random instant: somewhere in the first few saves, mid-request
		// as often as not.
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond) // the kill's random instant, not synchronisation
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
		<-c.done
		_ = c.cmd.Wait()
		for _, l := range c.output() {
			if strings.HasPrefix(l, "ok ") {
				lastAcked = max(lastAcked, lineStep(t, l))
			}
			require.False(t, strings.HasPrefix(l, "err "), "a save failed: %s", l)
		}
		killed := time.Now()
		st := takeStore(t, f)
		took := time.Since(killed)
		steps := verifyAll(t, st)
		_, info, err := st.Latest(ctx)
		if lastAcked > 0 {
			require.NoError(t, err)
			require.GreaterOrEqual(t, info.Step, lastAcked, "Latest is older than the last acknowledged save")
		}
		t.Logf("round %d: last acknowledged %d, listed %d checkpoints, latest %d; lease taken %v after the kill", round, lastAcked, len(steps), info.Step, took.Round(time.Millisecond))
		require.NoError(t, st.Close())
	}
}

// TestPausedWriterCannotPublishAfterTakeover is the fencing test with two
// processes: writer A (a child) is stopped with SIGSTOP past its lease,
// B (this process) takes the store over and saves, A is resumed and
// tries to save and renew. Nothing A saves after the takeover may become
// visible (to B or to a reader), and B's state is Latest. A's own checks
// make its late saves fail with ErrLocked; "unguarded", A's checks are off
// and its late saves reach the server (as a request delayed in the network
// past the checks would), and the readers must hide them on their own.
func TestPausedWriterCannotPublishAfterTakeover(t *testing.T) {
	t.Parallel()
	for _, unguarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("unguarded=%v", unguarded), func(t *testing.T) {
			t.Parallel()
			pausedWriter(t, unguarded)
		})
	}
}

func pausedWriter(t *testing.T, unguarded bool) {
	f := newFixture(t)
	ctx := context.Background()
	var extra []string
	if unguarded {
		extra = append(extra, envUnguarded+"=1")
	}
	a := startChild(t, f, "saver", "a", extra...)
	a.waitFor(t, "ok ", 3, 60*time.Second)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))

	b := takeStore(t, f)
	sealed := verifyAll(t, b) // what B sees when it takes over
	for step := int64(10001); step <= 10003; step++ {
		_, err := b.Save(ctx, step, state{Writer: "b", Step: step})
		require.NoError(t, err)
	}
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	// A tries a few more saves (and renewals) after it wakes up.
	if unguarded {
		a.waitFor(t, "ok ", 3+len(sealed)+3, 30*time.Second)
	} else {
		a.waitFor(t, "err ", 2, 30*time.Second)
	}
	require.NoError(t, a.stdin.Close())
	a.waitFor(t, "close ", 1, 30*time.Second)

	t.Logf("A printed: %q", a.output())
	var acked []int64
	failed := false
	for _, l := range a.output() {
		switch {
		case strings.HasPrefix(l, "ok "):
			require.False(t, failed, "A acknowledged a save after one failed: %q", a.output())
			acked = append(acked, lineStep(t, l))
		case strings.HasPrefix(l, "err "):
			require.False(t, unguarded, "unguarded A failed a save: %s", l)
			failed = true
			require.Contains(t, l, "err "+strconv.FormatInt(lineStep(t, l), 10)+" true ", "not ErrLocked: %s", l)
		case strings.HasPrefix(l, "close ") && !unguarded:
			require.True(t, strings.HasPrefix(l, "close true "), "A's Close does not report the lost lease: %s", l)
		}
	}
	var late []int64 // A's saves that B had not seen when it took over
	for _, s := range acked {
		if !slices.Contains(sealed, s) {
			late = append(late, s)
		}
	}
	if unguarded {
		require.NotEmpty(t, late, "A saved nothing after the takeover: the test proves nothing")
	} else {
		require.Empty(t, late, "A acknowledged saves B had not seen")
	}

	reader, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer reader.Close()
	for who, st := range map[string]*checkpoint.Store[state]{"b": b, "reader": reader} {
		steps := verifyAll(t, st)
		for _, s := range steps {
			require.True(t, s >= 10001 || slices.Contains(sealed, s), "%s lists step %d, which A saved after the takeover", who, s)
		}
		for _, s := range sealed {
			require.Contains(t, steps, s, "%s lost step %d", who, s)
		}
		for _, s := range late {
			_, _, err := st.Load(ctx, s)
			require.ErrorIs(t, err, checkpoint.ErrNotFound, "%s loads A's late step %d", who, s)
		}
		got, info, err := st.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(10003), info.Step, who)
		require.Equal(t, "b", got.Writer, who)
	}
	require.NoError(t, b.Close())
}

// TestTwoProcessesContendingTakeTurns runs two writer processes that each
// take the store five times and save three steps in a row: the lease lets
// one at a time in, so every run of three is one writer's and no save
// fails.
func TestTwoProcessesContendingTakeTurns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const rounds = 5
	x := startChild(t, f, "contender", "x", envRounds+"="+strconv.Itoa(rounds))
	y := startChild(t, f, "contender", "y", envRounds+"="+strconv.Itoa(rounds))
	for _, c := range []*child{x, y} {
		<-c.done
		require.NoError(t, c.cmd.Wait(), "%q", c.output())
		require.Equal(t, 3*rounds, c.count("ok "), "%q", c.output())
	}
	reader, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer reader.Close()
	steps := verifyAll(t, reader)
	require.Len(t, steps, 6*rounds)
	for i, s := range steps {
		require.Equal(t, int64(i+1), s)
	}
	for first := int64(1); first <= 6*rounds; first += 3 {
		w0, _, err := reader.Load(ctx, first)
		require.NoError(t, err)
		for s := first + 1; s < first+3; s++ {
			w, _, err := reader.Load(ctx, s)
			require.NoError(t, err)
			require.Equal(t, w0.Writer, w.Writer, "steps %d and %d are of different writers: two held the lease", first, s)
		}
	}
}
