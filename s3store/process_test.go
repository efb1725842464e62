package s3store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// The tests below run writers as child processes: the test binary itself,
// in a killtest role (saverRole, contenderRole), reaching the server the
// test uses through the environment (s3Env). A child prints one line per
// event on stdout: "locked", "ack STEP" (a save returned without error),
// "err STEP LOCKED MESSAGE", "close MESSAGE".
const childTTL = testTTL

var (
	// saverRole saves step after step in the bucket Args[0] as the writer
	// Args[1] until the test stops it (or kills it). Args[2] "unguarded"
	// turns off its own lease checks (see Backend.unguarded).
	saverRole = killtest.Register("s3-saver", func(c *killtest.Child) int { return runChild(c, "saver") })
	// contenderRole takes the store in the bucket Args[0] as the writer
	// Args[1] Args[2] times, and saves three steps each time.
	contenderRole = killtest.Register("s3-contender", func(c *killtest.Child) int { return runChild(c, "contender") })
)

func runChild(c *killtest.Child, role string) int {
	s := server{endpoint: os.Getenv(envEndpoint), key: os.Getenv(envKey), secret: os.Getenv(envSecret)}
	client := s.client(&counter{rt: http0()})
	bucket, writer := c.Args[0], c.Args[1]
	var stop <-chan struct{}
	if role == "saver" {
		stop = c.Stopping() // before anything blocks
	}
	open := func() *checkpoint.Store[state] {
		for deadline := time.Now().Add(60 * time.Second); ; {
			b, err := New(client, bucket, "run", LeaseTTL(childTTL))
			if err != nil {
				c.Printf("close %v", err)
				os.Exit(2)
			}
			b.unguarded = role == "saver" && c.Args[2] == "unguarded"
			st, err := checkpoint.OpenBackend[state](b)
			if err == nil {
				c.Printf("locked")
				return st
			}
			if !errors.Is(err, checkpoint.ErrLocked) || time.Now().After(deadline) {
				c.Printf("close %v", err)
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
			c.Printf("close %v", err)
			os.Exit(2)
		}
		return info.Step + 1
	}
	ctx := context.Background()
	switch role {
	case "saver":
		// Saves step after step until stopped (or killed).
		st := open()
		for step := next(st); ; step++ {
			select {
			case <-stop:
				err := st.Close()
				c.Printf("close %v %v", errors.Is(err, checkpoint.ErrLocked), err)
				return 0
			default:
			}
			if _, err := st.Save(ctx, step, state{Writer: writer, Step: step, Pad: strings.Repeat("x", 2000)}); err != nil {
				c.Printf("err %d %v %s", step, errors.Is(err, checkpoint.ErrLocked), strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				c.Ack(step)
			}
		}
	case "contender":
		rounds, _ := strconv.Atoi(c.Args[2])
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
					c.Printf("err %d %v %v", step, errors.Is(err, checkpoint.ErrLocked), err)
					return 1
				}
				c.Ack(step)
			}
			if err := st.Close(); err != nil {
				c.Printf("close %v", err)
				return 1
			}
		}
		return 0
	}
	return 2
}

// startChild starts a writer process in role, as writer, on f's bucket.
func startChild(t *testing.T, f *fixture, role killtest.Role, writer string, args ...string) *killtest.Proc {
	t.Helper()
	p := role.Command(t, append([]string{f.bucket, writer}, args...)...)
	p.Cmd.Env = append(os.Environ(), envEndpoint+"="+f.srv.endpoint, envKey+"="+f.srv.key, envSecret+"="+f.srv.secret)
	p.Start(t)
	return p
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
		c := startChild(t, f, saverRole, fmt.Sprintf("w%d", round), "")
		c.Await(t, "locked", 1)
		// A random instant: somewhere in the first few saves (none to a
		// dozen acknowledged), mid-request as often as not.
		c.AwaitAcks(t, rand.IntN(13))
		c.Kill(t)
		for _, l := range c.Output() {
			if a, ok := killtest.Acked(l); ok {
				step, err := strconv.ParseInt(a, 10, 64)
				require.NoError(t, err, l)
				lastAcked = max(lastAcked, step)
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

// TestTwoProcessesContendingTakeTurns runs two writer processes that each
// take the store five times and save three steps in a row: the lease lets
// one at a time in, so every run of three is one writer's and no save
// fails.
func TestTwoProcessesContendingTakeTurns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const rounds = 5
	x := startChild(t, f, contenderRole, "x", strconv.Itoa(rounds))
	y := startChild(t, f, contenderRole, "y", strconv.Itoa(rounds))
	for _, c := range []*killtest.Proc{x, y} {
		require.NoError(t, c.Wait(), "%q", c.Output())
		require.Equal(t, 3*rounds, len(c.Acks()), "%q", c.Output())
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
