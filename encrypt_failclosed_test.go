package checkpoint_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// The rolling file's step is inside it: a rolling file encrypted to a key
// not given (written by a writer that rotated to a new key) may hold a
// newer step than every numbered checkpoint. Latest must stop at it with
// ErrNoKey, as at a numbered one, never resume silently from the older
// numbered checkpoint that opens.
func TestEncryptLatestStopsAtARollingFileOfAKeyNotGiven(t *testing.T) {
	t.Skip("BUG: an unreadable rolling file is listed as step 0 (entries.go eachName), so Latest tries it last and returns an older numbered checkpoint past an ErrNoKey rolling file")
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.SaveEvery(5))
	for step := int64(1); step <= 5; step++ {
		_, _, err := st.Tick(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	// The writer rotates to b (keeping a to read) and ticks on: step 7 is
	// only in the rolling file, encrypted to b.
	st = openStore[secretState](t, dir, checkpoint.Encrypt(b, a), checkpoint.WithRolling(), checkpoint.SaveEvery(5))
	for step := int64(6); step <= 7; step++ {
		_, saved, err := st.Tick(ctx, step, secretAt(step))
		require.NoError(t, err)
		require.True(t, saved)
	}
	require.NoError(t, st.Close())
	require.Equal(t, []string{"step_00000005.json", "step_last.json"}, checkpointNames(t, dir))

	// A reader not given b: the newest state is in a file it cannot open.
	old := openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.ReadOnly())
	v, info, err := old.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrNoKey, "Latest resumed from step %d (%v) past a rolling file of a key not given", info.Step, v)
}

// A plaintext rolling file is not damage to an encrypting store: Latest
// stops at it with ErrPlaintext, as at a numbered one, rather than pass it
// as a file of no step and resume from an older numbered checkpoint.
func TestEncryptLatestStopsAtAPlaintextRollingFile(t *testing.T) {
	t.Skip("BUG: an unreadable rolling file is listed as step 0 (entries.go eachName), so Latest tries it last and returns an older numbered checkpoint past an ErrPlaintext rolling file")
	t.Parallel()
	ctx := context.Background()
	dir, a := t.TempDir(), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.SaveEvery(5))
	for step := int64(1); step <= 5; step++ {
		_, _, err := st.Tick(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	plain := openStore[secretState](t, dir, checkpoint.WithRolling(), checkpoint.SaveEvery(5))
	for step := int64(6); step <= 7; step++ {
		_, _, err := plain.Tick(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, plain.Close())
	require.Equal(t, []string{"step_00000005.json", "step_last.json"}, checkpointNames(t, dir))

	st = openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.ReadOnly())
	v, info, err := st.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrPlaintext, "Latest resumed from step %d (%v) past a plaintext rolling file", info.Step, v)
}
