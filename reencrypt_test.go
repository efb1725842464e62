package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// Reencrypt rotates a store's key: every file is rewritten to the new key,
// after which the new identity alone reads every step; a second run
// rewrites nothing.
func TestReencryptRotatesEveryFileToTheNewKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(a), checkpoint.WithRolling(), checkpoint.SaveEvery(2))
	for step := int64(1); step <= 41; step++ {
		_, _, err := st.Tick(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.WriteJSON(ctx, "config.json", secretAt(0)))
	require.NoError(t, st.Close())

	got, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(b, a))
	require.NoError(t, err)
	require.Len(t, got.Rewritten, 20+1+1) // checkpoints, rolling file, side file
	require.Zero(t, got.Current)
	require.Empty(t, got.Failed)
	requireSealed(t, dir, b)

	st = openStore[secretState](t, dir, checkpoint.Encrypt(b), checkpoint.WithRolling())
	v, info, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, secretAt(41), v)
	require.Equal(t, checkpoint.KindRolling, info.Kind)
	for step := int64(2); step <= 40; step += 2 {
		v, _, err := st.Load(ctx, step)
		require.NoError(t, err)
		require.Equal(t, secretAt(step), v)
	}
	var side secretState
	require.NoError(t, st.ReadJSON(ctx, "config.json", &side))
	require.Equal(t, secretAt(0), side)
	require.NoError(t, st.Close())

	again, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(b, a))
	require.NoError(t, err)
	require.Empty(t, again.Rewritten)
	require.Equal(t, len(readDir(t, dir)), again.Current) // every file, and any index the store wrote, to b
}

// Reencrypt of a root of sessions rewrites every session's files, its
// session.json included.
func TestReencryptRotatesARootOfSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	root, err := checkpoint.OpenSessions(dir, checkpoint.Encrypt(a), checkpoint.NoSync())
	require.NoError(t, err)
	for _, id := range []string{"one", "user:42/two"} {
		s, err := root.Create(ctx, id, map[string]string{"k": secretMarker})
		require.NoError(t, err)
		st, err := checkpoint.OpenSession[secretState](root, s.ID)
		require.NoError(t, err)
		for step := int64(1); step <= 3; step++ {
			_, err := st.Save(ctx, step, secretAt(step))
			require.NoError(t, err)
		}
		require.NoError(t, st.Close())
	}
	require.NoError(t, root.Close())

	got, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(b, a))
	require.NoError(t, err)
	require.Len(t, got.Rewritten, 2*4)
	requireSealed(t, dir, b)

	root, err = checkpoint.OpenSessions(dir, checkpoint.Encrypt(b))
	require.NoError(t, err)
	defer root.Close()
	list, err := root.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, s := range list {
		require.NoError(t, s.Err)
		require.Equal(t, secretMarker, s.Meta["k"])
		st, err := checkpoint.OpenSession[secretState](root, s.ID, checkpoint.ReadOnly())
		require.NoError(t, err)
		v, _, err := st.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, secretAt(3), v)
		require.NoError(t, st.Close())
	}
}

// With ReadPlaintext, Reencrypt encrypts a plaintext store's files, and
// leaves alone a file no store writes.
func TestReencryptMigratesAPlaintextStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Gzip())
	for step := int64(1); step <= 5; step++ {
		_, err := st.Save(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.WriteJSON(ctx, "result.json", secretAt(0)))
	require.NoError(t, st.Close())
	notes := filepath.Join(dir, "NOTES.txt")
	require.NoError(t, os.WriteFile(notes, []byte(secretMarker), 0o644))

	// Without ReadPlaintext, each plaintext file of the store is a
	// failure, and nothing is written.
	before := readDir(t, dir)
	got, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(id))
	require.ErrorIs(t, err, checkpoint.ErrPlaintext)
	require.Len(t, got.Failed, 6)
	require.Equal(t, before, readDir(t, dir))

	got, err = checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(id), checkpoint.ReadPlaintext())
	require.NoError(t, err)
	require.Len(t, got.Rewritten, 6)
	data, err := os.ReadFile(notes)
	require.NoError(t, err)
	require.Equal(t, secretMarker, string(data), "a file no store writes was changed")
	require.NoError(t, os.Remove(notes))
	requireSealed(t, dir, id)

	st = openStore[secretState](t, dir, checkpoint.Encrypt(id))
	v, _, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, secretAt(5), v)
}

// A damaged file is reported and left as it is; the others are rewritten.
func TestReencryptReportsADamagedFileAndGoesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(a))
	for step := int64(1); step <= 3; step++ {
		_, err := st.Save(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	bad := filepath.Join(dir, "step_00000002.json")
	data, err := os.ReadFile(bad)
	require.NoError(t, err)
	data[len(data)-5] ^= 1
	require.NoError(t, os.WriteFile(bad, data, 0o644))

	got, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(b, a))
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Len(t, got.Rewritten, 2)
	require.Len(t, got.Failed, 1)
	require.ErrorIs(t, got.Failed[0], checkpoint.ErrCorrupt)
	require.Contains(t, got.Failed[0].Error(), "step_00000002.json")
	left, err := os.ReadFile(bad)
	require.NoError(t, err)
	require.Equal(t, data, left)

	// A file encrypted to a key not given is reported the same way.
	c := newIdentity(t)
	got, err = checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(c, b))
	require.ErrorIs(t, err, checkpoint.ErrNoKey)
	require.Len(t, got.Rewritten, 2)
	require.True(t, strings.Contains(err.Error(), checkpoint.KeyID(a.Recipient())))
}

// Reencrypt rewrites a store's files only under its writer lock.
func TestReencryptWaitsForTheWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(a))
	_, err := st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	_, err = checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(b, a))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.NoError(t, st.Close())
	got, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(b, a))
	require.NoError(t, err)
	require.Len(t, got.Rewritten, 1)
}
