package checkpoint_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	t.Parallel()
	ctx := context.Background()
	dir, a := t.TempDir(), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.SaveEvery(5))
	for step := int64(1); step <= 5; step++ {
		_, _, err := st.Tick(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	// A plaintext writer's rolling file of a newer step put in its place
	// (a plaintext store refuses to replace the encrypted one itself).
	plainDir := t.TempDir()
	plain := openStore[secretState](t, plainDir, checkpoint.WithRolling(), checkpoint.SaveEvery(5))
	for step := int64(6); step <= 7; step++ {
		_, _, err := plain.Tick(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, plain.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_last.json"), mustRead(t, filepath.Join(plainDir, "step_last.json")), 0o644))
	require.Equal(t, []string{"step_00000005.json", "step_last.json"}, checkpointNames(t, dir))

	st = openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.ReadOnly())
	v, info, err := st.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrPlaintext, "Latest resumed from step %d (%v) past a plaintext rolling file", info.Step, v)
}

// ReadPlaintext never makes the store write a plaintext file: a Fork of a
// session whose checkpoints are still plaintext (a migration under way)
// gives the new session encrypted checkpoints, not links to the plaintext
// ones.
func TestEncryptForkUnderReadPlaintextWritesNoPlaintext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	plain := openSessions(t, dir)
	_, err := plain.Create(ctx, "src", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSession[secretState](plain, "src")
	require.NoError(t, err)
	for step := int64(1); step <= 2; step++ {
		_, err = st.Save(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())

	root := openSessions(t, dir, checkpoint.Encrypt(id), checkpoint.ReadPlaintext())
	forked, err := root.Fork(ctx, "src", 2, nil)
	require.NoError(t, err)
	for _, name := range []string{"step_00000001.json", "step_00000002.json"} {
		data := mustRead(t, filepath.Join(dir, forked.ID, name))
		require.Truef(t, bytes.HasPrefix(data, []byte(keyLine(id.Recipient()))), "the fork's %s is plaintext", name)
	}
}

// An index of another key (or a plaintext one, written by a store that
// does not encrypt) is not the store's: List ignores it and lists every
// checkpoint, and a plaintext store beside an encrypting one never makes
// the encrypting one fail.
func TestEncryptIgnoresAnIndexItCannotOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ours, other := newIdentity(t), newIdentity(t)
	for name, writer := range map[string][]checkpoint.Option{"another key": {checkpoint.Encrypt(other)}, "plaintext": nil} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st := openStore[secretState](t, dir, checkpoint.Encrypt(ours))
			for step := int64(1); step <= 300; step++ {
				_, err := st.Save(ctx, step, secretAt(step))
				require.NoError(t, err)
			}
			require.NoError(t, st.Close())
			// Another store lists the directory and writes its index.
			w := openStore[secretState](t, dir, writer...)
			_, err := w.Save(ctx, 301, secretAt(301))
			require.NoError(t, err)
			_, err = w.List(ctx)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			require.FileExists(t, filepath.Join(dir, ".checkpoint.index"))

			st = openStore[secretState](t, dir, checkpoint.Encrypt(ours))
			infos, err := st.List(ctx)
			require.NoError(t, err)
			require.Len(t, infos, 301)
			n := 0
			for _, info := range infos {
				if info.Step <= 300 {
					require.Equal(t, checkpoint.PayloadJSON, info.Payload, "step %d", info.Step)
					n++
				}
			}
			require.Equal(t, 300, n)
			_, _, err = st.Latest(ctx)
			require.Error(t, err) // step 301 is not ours: Latest stops there
			require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
			require.NoError(t, st.Close())
		})
	}
}

// A store never destroys a file it cannot open: a Tick of a store not
// given the key of the rolling file (possibly newer than every step it
// can read) must not replace it.
func TestEncryptTickKeepsARollingFileOfAKeyNotGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(b), checkpoint.WithRolling(), checkpoint.SaveEvery(100))
	_, _, err := st.Tick(ctx, 7, secretAt(7))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	before := mustRead(t, filepath.Join(dir, "step_last.json"))

	st = openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.SaveEvery(100))
	_, _, err = st.Tick(ctx, 1, secretAt(1))
	require.ErrorIs(t, err, checkpoint.ErrNoKey)
	require.NoError(t, st.Close())
	require.Equal(t, before, mustRead(t, filepath.Join(dir, "step_last.json")))
}

// Retention never removes a checkpoint it cannot read (a key not given, a
// plaintext one): it counts toward no rule.
func TestEncryptRetentionKeepsFilesItCannotOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(b))
	_, err := st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	plain := openStore[secretState](t, dir)
	_, err = plain.Save(ctx, 2, secretAt(2))
	require.NoError(t, err)
	require.NoError(t, plain.Close())
	before := readDir(t, dir)

	st = openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.KeepLast(1), checkpoint.KeepWithin(0))
	for step := int64(3); step <= 6; step++ {
		_, err := st.Save(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	_, err = st.Prune(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	after := readDir(t, dir)
	for _, name := range []string{"step_00000001.json", "step_00000002.json"} {
		require.Equal(t, before[name], after[name], name)
	}
	require.NotContains(t, after, "step_00000005.json") // retention ran
}

// A root of sessions not given a session's key neither prunes nor
// removes it: its session.json is ErrNoKey, not damage.
func TestEncryptSessionsKeepASessionOfAKeyNotGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	rb := openSessions(t, dir, checkpoint.Encrypt(b))
	_, err := rb.Create(ctx, "theirs", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSession[secretState](rb, "theirs")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	before := readDir(t, dir)

	ra := openSessions(t, dir, checkpoint.Encrypt(a))
	removed, err := ra.PruneIdle(ctx, 0) // skipped, reported or not
	if err != nil {
		require.ErrorIs(t, err, checkpoint.ErrNoKey)
		require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
	}
	require.Empty(t, removed)
	idle, err := ra.Idle(ctx, 0)
	if err != nil {
		require.ErrorIs(t, err, checkpoint.ErrNoKey)
	}
	require.Empty(t, idle)
	_, err = ra.RemoveStaging(ctx)
	require.NoError(t, err)
	_, err = ra.Get(ctx, "theirs")
	require.ErrorIs(t, err, checkpoint.ErrNoKey)
	_, err = ra.Create(ctx, "theirs", nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Equal(t, before, readDir(t, dir))
}

// Nor does a Tick in another compression remove it (a rolling file of
// another compression is taken for an older one of the store's).
func TestEncryptTickOfAnotherCompressionKeepsARollingFileOfAKeyNotGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(b), checkpoint.WithRolling(), checkpoint.SaveEvery(100))
	_, _, err := st.Tick(ctx, 7, secretAt(7))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	before := mustRead(t, filepath.Join(dir, "step_last.json"))

	st = openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.SaveEvery(100), checkpoint.Zstd())
	_, _, _ = st.Tick(ctx, 1, secretAt(1))
	require.NoError(t, st.Close())
	require.FileExists(t, filepath.Join(dir, "step_last.json"))
	require.Equal(t, before, mustRead(t, filepath.Join(dir, "step_last.json")))
}
