//go:build unix

package s3store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

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
	guard := ""
	if unguarded {
		guard = "unguarded"
	}
	a := startChild(t, f, saverRole, "a", guard)
	a.AwaitAcks(t, 3)
	require.NoError(t, a.Signal(syscall.SIGSTOP))

	b := takeStore(t, f)
	sealed := verifyAll(t, b) // what B sees when it takes over
	for step := int64(10001); step <= 10003; step++ {
		_, err := b.Save(ctx, step, state{Writer: "b", Step: step})
		require.NoError(t, err)
	}
	require.NoError(t, a.Signal(syscall.SIGCONT))
	// A tries a few more saves (and renewals) after it wakes up.
	a.Timeout = 30 * time.Second
	if unguarded {
		a.AwaitAcks(t, 3+len(sealed)+3)
	} else {
		a.Await(t, "err ", 2)
	}
	a.Stop(t)
	a.Await(t, "close ", 1)

	t.Logf("A printed: %q", a.Output())
	var acked []int64
	failed := false
	for _, l := range a.Output() {
		switch {
		case strings.HasPrefix(l, "ack "):
			require.False(t, failed, "A acknowledged a save after one failed: %q", a.Output())
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
