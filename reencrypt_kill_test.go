package checkpoint_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// rekeyRole rotates the store Args[0] back and forth between the
// identities Args[1] and Args[2] (AGE-SECRET-KEY-... strings), durably,
// acknowledging each whole rotation, until it is killed.
var rekeyRole = killtest.Register("rekey", func(c *killtest.Child) int {
	ctx := context.Background()
	var ids [2]*age.X25519Identity
	for i := range ids {
		id, err := age.ParseX25519Identity(c.Args[1+i])
		if err != nil {
			c.Fail(2, err)
		}
		ids[i] = id
	}
	for round := 1; ; round++ {
		b, err := dirstore.Open(c.Args[0])
		if err != nil {
			c.Fail(3, err)
		}
		to, from := ids[round%2], ids[(round+1)%2]
		if _, err := checkpoint.Reencrypt(ctx, b, checkpoint.Encrypt(to, from)); err != nil {
			c.Fail(4, err)
		}
		if err := b.Close(); err != nil {
			c.Fail(5, err)
		}
		c.Ack(round)
	}
})

// A kill -9 at any instant of a Reencrypt leaves every file of the store
// whole, encrypted to the old key or the new one: with both, every
// checkpoint and side file loads as saved, and a rerun completes the
// rotation.
func TestReencryptSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.SaveEvery(2))
	for step := int64(1); step <= 21; step++ {
		_, _, err := st.Tick(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.WriteJSON(ctx, "side.json", secretAt(0)))
	require.NoError(t, st.Close())
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 26))
	both := checkpoint.Encrypt(a, b)
	for kill := 0; kill < killtest.Kills(t, 2); kill++ {
		p := rekeyRole.Start(t, dir, a.String(), b.String())
		p.AwaitAcks(t, 1+rng.IntN(3))
		_ = p.Kill(t) // the error says it was killed
		require.Empty(t, p.Stderr())

		r := openStore[secretState](t, dir, both, checkpoint.WithRolling(), checkpoint.ReadOnly())
		v, info, err := r.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(21), info.Step)
		require.Equal(t, secretAt(21), v)
		for step := int64(2); step <= 20; step += 2 {
			v, _, err := r.Load(ctx, step)
			require.NoError(t, err, "step "+strconv.FormatInt(step, 10))
			require.Equal(t, secretAt(step), v)
		}
		var side secretState
		require.NoError(t, r.ReadJSON(ctx, "side.json", &side))
		require.Equal(t, secretAt(0), side)
		require.NoError(t, r.Close())
	}
	_, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(b, a))
	require.NoError(t, err)
	// A killed run leaves a temporary file (encrypted to either key),
	// which Reencrypt does not remove: the store's writer does at Open.
	w := openStore[secretState](t, dir, checkpoint.Encrypt(b))
	require.NoError(t, w.Close())
	requireSealed(t, dir, b)
}
