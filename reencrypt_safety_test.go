package checkpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// memSessions makes a root of a session of two checkpoints and a side
// file on m, with opts.
func memSessions(t *testing.T, m *backendtest.Mem, opts ...checkpoint.Option) {
	t.Helper()
	ctx := context.Background()
	b, err := m.Open()
	require.NoError(t, err)
	root, err := checkpoint.OpenSessionsBackend(b, opts...)
	require.NoError(t, err)
	defer root.Close()
	for _, id := range []string{"user:2"} {
		_, err := root.Create(ctx, id, map[string]string{"owner": id})
		require.NoError(t, err)
		st, err := checkpoint.OpenSession[secretState](root, id)
		require.NoError(t, err)
		for step := int64(1); step <= 2; step++ {
			_, err := st.Save(ctx, step, secretAt(step))
			require.NoError(t, err)
		}
		require.NoError(t, st.WriteJSON(ctx, "side.json", secretAt(9)))
		require.NoError(t, st.Close())
	}
}

// requireMemSessions checks that every file memSessions made reads, with
// opts, as it was written.
func requireMemSessions(t *testing.T, m *backendtest.Mem, opts ...checkpoint.Option) {
	t.Helper()
	ctx := context.Background()
	b, err := m.Open()
	require.NoError(t, err)
	root, err := checkpoint.OpenSessionsBackend(b, opts...)
	require.NoError(t, err)
	defer root.Close()
	for _, id := range []string{"user:2"} {
		s, err := root.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, id, s.Meta["owner"])
		st, err := checkpoint.OpenSession[secretState](root, id, checkpoint.ReadOnly())
		require.NoError(t, err)
		for step := int64(1); step <= 2; step++ {
			v, _, err := st.Load(ctx, step)
			require.NoError(t, err)
			require.Equal(t, secretAt(step), v)
		}
		var side secretState
		require.NoError(t, st.ReadJSON(ctx, "side.json", &side))
		require.Equal(t, secretAt(9), side)
		require.NoError(t, st.Close())
	}
}

// A power cut at any instant of a Reencrypt of a root of sessions leaves
// every file encrypted, whole, to the old key or the new one: both read
// everything, a rerun completes the rotation, and the new key alone then
// reads everything.
func TestReencryptSurvivesAPowerCutAtEveryOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := newIdentity(t), newIdentity(t)
	base := backendtest.NewMem(backendtest.MemLocal())
	memSessions(t, base, checkpoint.Encrypt(a))
	both := []checkpoint.Option{checkpoint.Encrypt(b, a)}
	// How many mutating calls a whole run makes.
	full := base.CrashClone(backendtest.CrashCloneConfig{UnsyncedPercent: 100})
	start := full.Ops()
	fb, err := full.Open()
	require.NoError(t, err)
	_, err = checkpoint.Reencrypt(ctx, fb, both...)
	require.NoError(t, err)
	require.NoError(t, fb.Close())
	total := full.Ops() - start
	require.Greater(t, total, 3)
	for n := 1; n <= total; n++ {
		m := base.CrashClone(backendtest.CrashCloneConfig{UnsyncedPercent: 100})
		m.CutPowerAt(n)
		mb, err := m.Open()
		require.NoError(t, err)
		_, err = checkpoint.Reencrypt(ctx, mb, both...)
		require.ErrorIsf(t, err, backendtest.ErrPowerCut, "cut at %d of %d", n, total)
		mb.Close()
		for _, keep := range []int{0, 100} {
			after := m.CrashClone(backendtest.CrashCloneConfig{UnsyncedPercent: keep})
			requireMemSessions(t, after, both...)
			rb, err := after.Open()
			require.NoError(t, err)
			_, err = checkpoint.Reencrypt(ctx, rb, both...)
			require.NoErrorf(t, err, "rerun after a cut at %d of %d", n, total)
			require.NoError(t, rb.Close())
			requireMemSessions(t, after, checkpoint.Encrypt(b))
		}
	}
}

// Reencrypt of a plaintext store (ReadPlaintext) encrypts the store's
// files and leaves alone what it cannot tell is the store's: a user's own
// files kept in the store's directory, or beside the sessions of a root.
func TestReencryptLeavesAUsersFilesAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	root := openSessions(t, dir)
	_, err := root.Create(ctx, "s1", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSession[secretState](root, "s1")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	users := map[string][]byte{
		"README.md":         []byte("# my runs\n"),
		"s1/notes.txt":      []byte("the user's notes\n"),
		"s1/step_1.txt":     []byte("{}"),
		"s1/.hidden":        []byte("x"),
		"s1/x.json.corrupt": []byte("x"),
	}
	for name, data := range users {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), data)
	}
	_, err = checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(id), checkpoint.ReadPlaintext())
	require.NoError(t, err)
	for name, data := range users {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		require.NoError(t, err)
		require.Truef(t, bytes.Equal(data, got), "Reencrypt encrypted the user's file %s", name)
	}
	require.True(t, bytes.HasPrefix(mustRead(t, filepath.Join(dir, "s1", "step_00000001.json")), []byte(keyLine(id.Recipient()))))
}

// Reencrypted.Failed promises that a damaged file is reported and left as
// it is. A damaged plaintext checkpoint (ReadPlaintext) must be too, not
// encrypted unread: encrypted, its damage is only found at a load, and the
// migration reports a clean run.
func TestReencryptReportsADamagedPlaintextCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	st := openStore[secretState](t, dir)
	_, err := st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	good := mustRead(t, filepath.Join(dir, "step_00000001.json"))
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 1
	writeFile(t, filepath.Join(dir, "step_00000002.json"), bad)

	got, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(id), checkpoint.ReadPlaintext())
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Len(t, got.Failed, 1)
	require.Equal(t, bad, mustRead(t, filepath.Join(dir, "step_00000002.json")))
}

// The header index is the store's derived data, which Reencrypt removes
// rather than rewrites: one it cannot open (of a key not given, left by a
// writer of another key) must not fail the rotation for ever.
func TestReencryptRemovesAnIndexOfAnotherKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, ours, other := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(other))
	for step := int64(1); step <= 300; step++ {
		_, err := st.Save(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	st = openStore[secretState](t, dir, checkpoint.Encrypt(other))
	_, err := st.List(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.FileExists(t, filepath.Join(dir, ".checkpoint.index"))
	// Checkpoints copied in by hand from another store of ours; the index
	// stays another key's.
	for step := int64(1); step <= 300; step++ {
		require.NoError(t, os.Remove(filepath.Join(dir, fmt.Sprintf("step_%08d.json", step))))
	}
	o := t.TempDir()
	st = openStore[secretState](t, o, checkpoint.Encrypt(ours))
	_, err = st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	writeFile(t, filepath.Join(dir, "step_00000001.json"), mustRead(t, filepath.Join(o, "step_00000001.json")))

	got, err := checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(newIdentity(t), ours))
	require.NoError(t, err, "%v", got.Failed)
	require.NoFileExists(t, filepath.Join(dir, ".checkpoint.index"))
}

// A store's directory is not a root of sessions: Reencrypt of a store
// with ReadPlaintext leaves alone a user's directory kept inside it (an
// export, a backup), which is no child store of it, and the files there.
func TestReencryptLeavesAUsersDirectoryAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	st := openStore[secretState](t, dir)
	_, err := st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "exports", "2026"), 0o755))
	users := map[string][]byte{
		"exports/report.json":             []byte(`{"total": 3}`),
		"exports/2026/step_00000001.json": mustRead(t, filepath.Join(dir, "step_00000001.json")),
	}
	for name, data := range users {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), data)
	}
	_, err = checkpoint.Reencrypt(ctx, openDirBackend(t, dir), checkpoint.Encrypt(id), checkpoint.ReadPlaintext())
	require.NoError(t, err)
	for name, data := range users {
		require.Truef(t, bytes.Equal(data, mustRead(t, filepath.Join(dir, filepath.FromSlash(name)))), "Reencrypt encrypted the user's file %s", name)
	}
}
