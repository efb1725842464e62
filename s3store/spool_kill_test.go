package s3store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// killPayloadSize is the size of the payloads the payload saver writes:
// past the spool memory it is given (64 KiB), so each goes through a file.
const killPayloadSize = 3 << 20

// payloadSaverRole saves byte payloads (step after step, killPayloadSize
// bytes of randomPayload seeded with the step) with SaveFrom in the bucket
// Args[0] under the prefix Args[1], spooling in the directory Args[2]. With
// Args[3] "pause" it stops in its first payload's write function once the
// spool file exists (the event "spooling"), to be killed there.
var payloadSaverRole = killtest.Register("s3-payload-saver", func(c *killtest.Child) int {
	s := server{endpoint: os.Getenv(envEndpoint), key: os.Getenv(envKey), secret: os.Getenv(envSecret)}
	b, err := New(s.client(&counter{rt: http0()}), c.Args[0], c.Args[1], LeaseTTL(childTTL), SpoolDir(c.Args[2]), spoolMemory(64<<10))
	if err != nil {
		c.Fail(2, err)
	}
	st, err := checkpoint.OpenBackend[[]byte](b)
	if err != nil {
		c.Fail(2, err)
	}
	ctx := context.Background()
	for step := int64(1); ; step++ {
		_, err := st.SaveFrom(ctx, step, func(w io.Writer) error {
			if c.Args[3] == "pause" {
				if _, err := randomPayload(w, 1<<20, 0); err != nil {
					return err
				}
				c.Pause("spooling %d", step)
			}
			_, err := randomPayload(w, killPayloadSize, uint64(step))
			return err
		})
		if err != nil {
			c.Fail(3, err)
		}
		c.Ack(step)
	}
})

// TestKilledPayloadSaverLeavesNoSpoolAndNoTornPayload kills a process
// that saves byte payloads through the spool: once while its first
// payload is in its spool file, then twice at a random instant. Each time
// nothing is left in the spool directory (on systems that let an open file
// be removed: the file has no name from its creation on, which the paused
// round checks while the process holds it), and every checkpoint a reader
// lists is a whole payload with its step's bytes, the last acknowledged
// among them.
func TestKilledPayloadSaverLeavesNoSpoolAndNoTornPayload(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	want := func(step int64) []byte {
		sum, err := randomPayload(io.Discard, killPayloadSize, uint64(step))
		require.NoError(t, err)
		return sum
	}
	spoolGone := func(dir string) {
		t.Helper()
		if runtime.GOOS == "windows" {
			return // the name lives until the file is closed (see SpoolDir)
		}
		emptyDir(t, dir)
	}
	for round := range 3 {
		prefix := fmt.Sprintf("payloads%d", round)
		dir := t.TempDir()
		mode := "run"
		if round == 0 {
			mode = "pause"
		}
		c := startChild(t, f, payloadSaverRole, prefix, dir, mode)
		lastAcked := int64(0)
		if round == 0 {
			c.Await(t, "spooling", 1)
			spoolGone(dir)
		} else {
			c.AwaitAcks(t, rand.IntN(4))
		}
		c.Kill(t)
		require.Empty(t, c.Stderr())
		for _, a := range c.Acks() {
			step, err := strconv.ParseInt(a, 10, 64)
			require.NoError(t, err)
			lastAcked = max(lastAcked, step)
		}
		spoolGone(dir)

		b, err := New(f.client, f.bucket, prefix)
		require.NoError(t, err)
		r, err := checkpoint.OpenBackend[[]byte](b, checkpoint.ReadOnly())
		require.NoError(t, err)
		infos, err := r.List(ctx)
		require.NoError(t, err)
		var last int64
		for _, in := range infos {
			rc, _, err := r.OpenPayloadExact(ctx, in)
			require.NoError(t, err, "listed step %d", in.Step)
			h := sha256.New()
			n, err := io.Copy(h, rc)
			rc.Close()
			require.NoError(t, err, "listed step %d", in.Step)
			require.EqualValues(t, killPayloadSize, n)
			require.Equal(t, want(in.Step), h.Sum(nil), "step %d", in.Step)
			last = max(last, in.Step)
		}
		require.GreaterOrEqual(t, last, lastAcked, "the last acknowledged payload is listed")
		if round == 0 {
			require.Empty(t, infos, "a payload killed in its spool is not published")
		}
		t.Logf("round %d: %d acknowledged, %d listed", round, lastAcked, len(infos))
		require.NoError(t, r.Close())
	}
}
