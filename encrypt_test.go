package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

// secretMarker is in every state the encryption tests save: no file of an
// encrypting store may hold it.
const secretMarker = "hunter2-the-secret"

type secretState struct {
	Step   int64  `json:"step"`
	Secret string `json:"secret"`
}

func secretAt(step int64) secretState { return secretState{Step: step, Secret: secretMarker} }

func newIdentity(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	return id
}

// requireSealed checks that every regular file under dir (but the
// directory's lock file) is encrypted to id's key and holds no plaintext.
func requireSealed(t *testing.T, dir string, id *age.X25519Identity) (files int) {
	t.Helper()
	line := "checkpoint-age-v1 " + checkpoint.KeyID(id.Recipient()) + "\n"
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == dirstore.LockName {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		require.Truef(t, strings.HasPrefix(string(data), line), "%s is not encrypted to the key: %q", path, data[:min(len(data), 40)])
		require.NotContains(t, string(data), secretMarker, path)
		require.NotContains(t, string(data), `"step"`, path)
		files++
		return nil
	})
	require.NoError(t, err)
	return files
}

// Every file an encrypting store writes is encrypted, and holds none of
// what the store was given: checkpoints of every kind and compression, the
// rolling file, a byte payload, a side file, the header index.
func TestEncryptSealsEveryFileTheStoreWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, comp := range []struct {
		name string
		opts []checkpoint.Option
	}{{"plain", nil}, {"gzip", []checkpoint.Option{checkpoint.Gzip()}}, {"zstd", []checkpoint.Option{checkpoint.Zstd()}}} {
		t.Run(comp.name, func(t *testing.T) {
			t.Parallel()
			dir, id := t.TempDir(), newIdentity(t)
			opts := append([]checkpoint.Option{checkpoint.Encrypt(id), checkpoint.WithRolling(), checkpoint.SaveEvery(100)}, comp.opts...)
			st := openStore[secretState](t, dir, opts...)
			n := int64(300) // past 256: the first List writes the index
			if comp.name != "plain" {
				n = 20
			}
			for step := int64(1); step <= n; step++ {
				_, err := st.Save(ctx, step, secretAt(step), checkpoint.WithMeta("who", secretMarker))
				require.NoError(t, err)
			}
			info, _, err := st.Tick(ctx, n+1, secretAt(n+1)) // the rolling file
			require.NoError(t, err)
			require.Equal(t, checkpoint.KindRolling, info.Kind)
			_, err = st.SaveFrom(ctx, n+2, func(w io.Writer) error {
				_, err := io.WriteString(w, strings.Repeat(secretMarker, 10000))
				return err
			})
			require.NoError(t, err)
			_, err = st.SaveError(ctx, n+3, secretAt(n+3), errors.New(secretMarker))
			require.NoError(t, err)
			require.NoError(t, st.WriteJSON(ctx, "result.json", secretAt(0)))
			require.NoError(t, st.Close())
			// A fresh store's first List of more than 256 checkpoints writes
			// the header index.
			st = openStore[secretState](t, dir, opts...)
			infos, err := st.List(ctx)
			require.NoError(t, err)
			require.Len(t, steps(infos), int(n+3))
			require.NoError(t, st.Close())
			if n > 256 {
				require.FileExists(t, filepath.Join(dir, ".checkpoint.index"))
			}
			require.GreaterOrEqual(t, requireSealed(t, dir, id), int(n+4))

			st = openStore[secretState](t, dir, append(opts, checkpoint.ReadOnly())...)
			v, info, err := st.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, secretAt(n+3), v)
			require.Equal(t, n+3, info.Step)
			var side secretState
			require.NoError(t, st.ReadJSON(ctx, "result.json", &side))
			require.Equal(t, secretAt(0), side)
			r, pinfo, err := st.OpenPayload(ctx, n+2)
			require.NoError(t, err)
			got, err := io.ReadAll(r)
			require.NoError(t, err)
			require.NoError(t, r.Close())
			require.Equal(t, strings.Repeat(secretMarker, 10000), string(got))
			require.Equal(t, checkpoint.PayloadBytes, pinfo.Payload)
			if comp.name == "plain" { // known without reading: from the size
				require.Equal(t, int64(10000*len(secretMarker)), pinfo.PayloadSize)
			}
			infos, err = st.List(ctx)
			require.NoError(t, err)
			require.Equal(t, secretMarker, infos[0].Meta["who"])
			require.Equal(t, secretMarker, infos[len(infos)-1].Error.Message)
		})
	}
}

// A session root opened with Encrypt encrypts each session's metadata and
// checkpoints, and lists, gets and forks its sessions.
func TestEncryptSealsSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	root, err := checkpoint.OpenSessions(dir, checkpoint.Encrypt(id), checkpoint.NoSync())
	require.NoError(t, err)
	defer root.Close()
	s, err := root.Create(ctx, "run-1", map[string]string{"owner": secretMarker})
	require.NoError(t, err)
	st, err := checkpoint.OpenSession[secretState](root, s.ID)
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err = st.Save(ctx, step, secretAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	forked, err := root.Fork(ctx, "run-1", 2, nil)
	require.NoError(t, err)
	requireSealed(t, dir, id)

	again, err := checkpoint.OpenSessions(dir, checkpoint.Encrypt(id))
	require.NoError(t, err)
	defer again.Close()
	got, err := again.Get(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, secretMarker, got.Meta["owner"])
	list, err := again.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	fst, err := checkpoint.OpenSession[secretState](again, forked.ID, checkpoint.ReadOnly())
	require.NoError(t, err)
	v, _, err := fst.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, secretAt(2), v)
	require.NoError(t, fst.Close())

	// Without the key, the sessions are not damaged: their metadata is
	// encrypted to a key not given.
	plain, err := checkpoint.OpenSessions(dir)
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Get(ctx, "run-1")
	require.ErrorIs(t, err, checkpoint.ErrNoKey)
	require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
}

// A checkpoint encrypted to a key no identity given opens is not damage:
// Latest stops at it with ErrNoKey naming the key (never resumes from an
// older step, never starts afresh), and no save moves it aside.
func TestEncryptStopsAtAKeyNotGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, a, b := t.TempDir(), newIdentity(t), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(a))
	_, err := st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	st = openStore[secretState](t, dir, checkpoint.Encrypt(b, a))
	_, err = st.Save(ctx, 2, secretAt(2)) // to b's key
	require.NoError(t, err)
	require.NoError(t, st.Close())
	before := readDir(t, dir)

	for _, opts := range [][]checkpoint.Option{
		{checkpoint.Encrypt(a)}, // b's key not given
		{checkpoint.Encrypt(newIdentity(t))},
		nil, // a plaintext store
	} {
		st := openStore[secretState](t, dir, opts...)
		_, _, err := st.Latest(ctx)
		require.ErrorIs(t, err, checkpoint.ErrNoKey)
		require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
		require.Contains(t, err.Error(), checkpoint.KeyID(b.Recipient()))
		_, _, err = st.Load(ctx, 2)
		require.ErrorIs(t, err, checkpoint.ErrNoKey)
		// A save of that step finds it in its way and leaves it.
		_, err = st.Save(ctx, 2, secretAt(2))
		require.ErrorIs(t, err, checkpoint.ErrExists)
		infos, err := st.List(ctx)
		require.NoError(t, err)
		require.Len(t, infos, 2)
		require.NoError(t, st.Close())
		require.Equal(t, before, readDir(t, dir), "a file no identity opens was changed")
	}
}

// An encrypting store never returns the state of a plaintext file: it is
// ErrPlaintext, not damage, and Latest stops at it. ReadPlaintext reads it,
// and the store's own saves are encrypted all the same.
func TestEncryptFailsClosedOnPlaintext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(id))
	_, err := st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	plain := openStore[secretState](t, dir)
	_, err = plain.Save(ctx, 2, secretState{Step: 2, Secret: "planted"})
	require.NoError(t, err)
	require.NoError(t, plain.Close())
	before := readDir(t, dir)

	st = openStore[secretState](t, dir, checkpoint.Encrypt(id))
	_, _, err = st.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrPlaintext)
	require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
	_, _, err = st.Load(ctx, 2)
	require.ErrorIs(t, err, checkpoint.ErrPlaintext)
	_, err = st.Save(ctx, 2, secretAt(2))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.NoError(t, st.Close())
	require.Equal(t, before, readDir(t, dir))

	mig := openStore[secretState](t, dir, checkpoint.Encrypt(id), checkpoint.ReadPlaintext())
	v, _, err := mig.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, "planted", v.Secret)
	_, err = mig.Save(ctx, 3, secretAt(3))
	require.NoError(t, err)
	require.NoError(t, mig.Close())
	data, err := os.ReadFile(filepath.Join(dir, "step_00000003.json"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, []byte("checkpoint-age-v1 ")))
}

func TestEncryptRefusesBadOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := checkpoint.Open[secretState](dir, checkpoint.ReadPlaintext())
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = checkpoint.Open[secretState](dir, checkpoint.Encrypt(nil))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = checkpoint.Open[secretState](dir, checkpoint.Encrypt(newIdentity(t), nil))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = checkpoint.Reencrypt(context.Background(), openDirBackend(t, dir))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}

// readDir returns every file under dir (but the lock file) and its bytes.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == dirstore.LockName {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	require.NoError(t, err)
	return files
}

// A fork made with ReadPlaintext from a plaintext session is encrypted: its
// checkpoints are copied through the encryption, not linked as they are.
func TestEncryptForkOfAPlaintextSessionIsEncrypted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	root, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	s, err := root.Create(ctx, "plain", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSession[secretState](root, s.ID)
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, root.Close())

	root, err = checkpoint.OpenSessions(dir, checkpoint.NoSync(), checkpoint.Encrypt(id), checkpoint.ReadPlaintext())
	require.NoError(t, err)
	defer root.Close()
	forked, err := root.Fork(ctx, "plain", 1, nil)
	require.NoError(t, err)
	requireSealed(t, filepath.Join(dir, forked.ID), id)
	st, err = checkpoint.OpenSession[secretState](root, forked.ID, checkpoint.ReadOnly())
	require.NoError(t, err)
	defer st.Close()
	v, _, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, secretAt(1), v)
}
