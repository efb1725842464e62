package killtest_test

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

func TestMain(m *testing.M) {
	killtest.Dispatch()
	os.Exit(m.Run())
}

var (
	// counter acknowledges 1, 2, 3, ... until it is killed.
	counter = killtest.Register("counter", func(c *killtest.Child) int {
		for i := 1; ; i++ {
			c.Ack(i)
		}
	})
	// pauser stops at "at 1", "at 2", ... and exits after "at 3".
	pauser = killtest.Register("pauser", func(c *killtest.Child) int {
		for i := 1; i <= 3; i++ {
			c.Pause("at %d", i)
		}
		return 0
	})
	// echo prints its arguments and waits for its input to close.
	echo = killtest.Register("echo", func(c *killtest.Child) int {
		for _, a := range c.Args {
			c.Printf("arg %s", a)
		}
		select {}
	})
	// stopper ends itself with status 3 when its test stops it.
	stopper = killtest.Register("stopper", func(c *killtest.Child) int {
		stop := c.Stopping()
		c.Printf("ready")
		<-stop
		c.Printf("stopped")
		return 3
	})
	failer = killtest.Register("failer", func(c *killtest.Child) int {
		c.Fail(7, errors.New("boom"))
		return 0
	})
)

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	return exit.ExitCode()
}

// TestKillLandsAfterTheAwaitedAcknowledgement kills a child after its
// fifth acknowledgement: the child dies of the kill, and its output holds
// the five and those it printed before the kill landed, in order.
func TestKillLandsAfterTheAwaitedAcknowledgement(t *testing.T) {
	t.Parallel()
	p := counter.Start(t)
	require.Equal(t, []string{"1", "2", "3", "4", "5"}, p.AwaitAcks(t, 5))
	err := p.Kill(t)
	if runtime.GOOS != "windows" { // TerminateProcess: status 1
		require.Equal(t, -1, exitCode(t, err), "killed by a signal")
	}
	acks := p.Acks()
	require.GreaterOrEqual(t, len(acks), 5)
	for i, a := range acks {
		require.Equal(t, strconv.Itoa(i+1), a)
	}
	require.Empty(t, p.Stderr())
}

// TestPausedChildGoesNoFurtherUntilResumed resumes a child once and kills
// it at its second pause: it printed nothing past that pause.
func TestPausedChildGoesNoFurtherUntilResumed(t *testing.T) {
	t.Parallel()
	p := pauser.Start(t)
	line, ok := p.Next(t)
	require.True(t, ok)
	require.Equal(t, "at 1", line)
	p.Resume(t)
	line, ok = p.Next(t)
	require.True(t, ok)
	require.Equal(t, "at 2", line)
	require.Error(t, p.Kill(t))
	_, ok = p.Next(t)
	require.False(t, ok)
	require.Equal(t, []string{"at 1", "at 2"}, p.Output())

	// Resumed at each pause, it runs to its end.
	p = pauser.Start(t)
	for i := 1; i <= 3; i++ {
		require.Equal(t, "at "+strconv.Itoa(i), p.Await(t, "", i)[i-1])
		p.Resume(t)
	}
	require.NoError(t, p.Wait())
	require.Equal(t, 3, p.Count("at "))
}

// TestChildGetsItsArgumentsAndExitsWhenStopped: the arguments arrive
// whole, and a child that does not listen for Stop exits with status 0.
func TestChildGetsItsArgumentsAndExitsWhenStopped(t *testing.T) {
	t.Parallel()
	args := []string{"a b", "", "c=d\"e", "ü\\"}
	p := echo.Start(t, args...)
	lines := p.Await(t, "arg ", len(args))
	for i, a := range args {
		require.Equal(t, "arg "+a, lines[i])
	}
	p.Stop(t)
	require.NoError(t, p.Wait())
}

// TestStoppingLetsTheChildEndItself: a child that called Stopping is told,
// and exits as it chooses.
func TestStoppingLetsTheChildEndItself(t *testing.T) {
	t.Parallel()
	p := stopper.Start(t)
	p.Await(t, "ready", 1)
	p.Stop(t)
	require.Equal(t, 3, exitCode(t, p.Wait()))
	require.Equal(t, []string{"ready", "stopped"}, p.Output())
}

// TestFailedChildShowsItsErrorAndStatus.
func TestFailedChildShowsItsErrorAndStatus(t *testing.T) {
	t.Parallel()
	p := failer.Start(t)
	require.Equal(t, 7, exitCode(t, p.Wait()))
	require.Equal(t, "boom", strings.TrimSpace(p.Stderr()))
	require.Empty(t, p.Output())
}

func TestKillsComesFromTheEnvironment(t *testing.T) {
	t.Setenv(killtest.KillsEnv, "")
	require.Equal(t, 12, killtest.Kills(t, 12))
	t.Setenv(killtest.KillsEnv, "3")
	require.Equal(t, 3, killtest.Kills(t, 12))
}
