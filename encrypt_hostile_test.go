package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// sealedBytes returns the bytes of the checkpoint of step that a store
// encrypting to id writes (state secretAt(step)), with opts.
func sealedBytes(t *testing.T, id *age.X25519Identity, step int64, opts ...checkpoint.Option) []byte {
	t.Helper()
	dir := t.TempDir()
	st := openStore[secretState](t, dir, append([]checkpoint.Option{checkpoint.Encrypt(id)}, opts...)...)
	info, err := st.Save(context.Background(), step, secretAt(step))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	return mustRead(t, filepath.Join(dir, info.Name()))
}

// plainBytes is sealedBytes for a store that does not encrypt.
func plainBytes(t *testing.T, step int64, v secretState) []byte {
	t.Helper()
	dir := t.TempDir()
	st := openStore[secretState](t, dir)
	info, err := st.Save(context.Background(), step, v)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	return mustRead(t, filepath.Join(dir, info.Name()))
}

// ageTo encrypts plain to recipients with age, no key line.
func ageTo(t testing.TB, plain []byte, to ...age.Recipient) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, to...)
	require.NoError(t, err)
	_, err = w.Write(plain)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func keyLine(r *age.X25519Recipient) string {
	return "checkpoint-age-v1 " + checkpoint.KeyID(r) + "\n"
}

type verdict int

const (
	isDamage verdict = iota
	isNoKey
	isPlaintext
	isGood
)

// Each hostile file at the newest step's name is judged as it must be: a
// file that no key opens is ErrNoKey, a plaintext one ErrPlaintext (both
// stop Latest, and no save moves them aside or changes them), a good one
// loads, and anything else is damage (Latest falls back past it, a save of
// its step moves it aside).
func TestEncryptJudgesHostileFiles(t *testing.T) {
	t.Parallel()
	ours, other := newIdentity(t), newIdentity(t)
	good2 := sealedBytes(t, ours, 2)
	good1 := sealedBytes(t, ours, 1)
	plain2 := plainBytes(t, 2, secretAt(2))
	ourLine, otherLine := keyLine(ours.Recipient()), keyLine(other.Recipient())
	body2 := good2[len(ourLine):]
	otherBody := sealedBytes(t, other, 2)[len(otherLine):]
	huge := []byte(otherLine + "age-encryption.org/v1\n-> X25519 " + strings.Repeat("A", 3<<20) + "\n")
	random := make([]byte, 200)
	rand.Read(random)
	var stanzas []age.Recipient
	stanzas = append(stanzas, ours.Recipient())
	for range 20 {
		stanzas = append(stanzas, newIdentity(t).Recipient())
	}
	for _, c := range []struct {
		name string
		data []byte
		want verdict
	}{
		{"good", good2, isGood},
		{"empty", nil, isDamage},
		{"only our key line", []byte(ourLine), isDamage},
		{"only another key line", []byte(otherLine), isDamage},
		{"half a key line", []byte(ourLine[:10]), isDamage},
		{"key line upper-case hex", append([]byte(ourLine[:len(ourLine)-17]+strings.ToUpper(ourLine[len(ourLine)-17:])), body2...), isDamage},
		{"our key line, another key's file", append([]byte(ourLine), otherBody...), isDamage},
		{"another key line, our key's file", append([]byte(otherLine), body2...), isDamage},
		{"another key's file", append([]byte(otherLine), otherBody...), isNoKey},
		{"another key line, garbage", append([]byte(otherLine), random...), isDamage},
		{"another key line, huge header", huge, isDamage},
		{"age file to our key, no key line", ageTo(t, plain2, ours.Recipient()), isPlaintext},
		{"plaintext", plain2, isPlaintext},
		{"our key's step 1 renamed to step 2", good1, isDamage},
		{"flipped last byte", append(bytes.Clone(good2[:len(good2)-1]), good2[len(good2)-1]^1), isDamage},
		{"truncated by one byte", good2[:len(good2)-1], isDamage},
		{"a byte appended", append(bytes.Clone(good2), 0), isDamage},
		// Not what the store writes (one stanza): refused before 21
		// unwraps are tried.
		{"to ours and 20 others", append([]byte(ourLine), ageTo(t, plain2, stanzas...)...), isDamage},
		{"another key's, with 20 stanzas", append([]byte(otherLine), ageTo(t, plain2, stanzas[1:]...)...), isNoKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json"), good1, 0o644))
			path := filepath.Join(dir, "step_00000002.json")
			require.NoError(t, os.WriteFile(path, c.data, 0o644))
			st := openStore[secretState](t, dir, checkpoint.Encrypt(ours))
			v, info, err := st.Latest(ctx)
			_, _, lerr := st.Load(ctx, 2)
			switch c.want {
			case isGood:
				require.NoError(t, err)
				require.NoError(t, lerr)
				require.Equal(t, int64(2), info.Step)
				require.Equal(t, secretAt(2), v)
				return
			case isDamage:
				require.NoError(t, err, "Latest does not fall back past damage")
				require.Equal(t, int64(1), info.Step)
				require.ErrorIs(t, lerr, checkpoint.ErrCorrupt)
				require.NotErrorIs(t, lerr, checkpoint.ErrNoKey)
				require.NotErrorIs(t, lerr, checkpoint.ErrPlaintext)
				_, err = st.Save(ctx, 2, secretAt(2))
				require.NoError(t, err, "a save of the step does not move damage aside")
				require.True(t, bytes.Equal(c.data, mustRead(t, path+".corrupt")), "the damaged file moved aside changed")
				return
			case isNoKey:
				require.ErrorIs(t, err, checkpoint.ErrNoKey)
				require.ErrorIs(t, lerr, checkpoint.ErrNoKey)
			case isPlaintext:
				require.ErrorIs(t, err, checkpoint.ErrPlaintext)
				require.ErrorIs(t, lerr, checkpoint.ErrPlaintext)
			}
			require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
			require.NotErrorIs(t, lerr, checkpoint.ErrCorrupt)
			_, err = st.Save(ctx, 2, secretAt(2))
			require.ErrorIs(t, err, checkpoint.ErrExists)
			_, err = st.Save(ctx, 3, secretAt(3))
			require.NoError(t, err)
			_, err = st.Prune(ctx)
			require.NoError(t, err)
			require.NoError(t, st.Delete(ctx, 3))
			require.True(t, bytes.Equal(c.data, mustRead(t, path)), "a file that is not damage changed")
			require.NoFileExists(t, path+".corrupt")
		})
	}
}

// age authenticates a file to its recipient, not its writer: whoever has
// the store's public key (age1..., which the store writes nowhere: only
// its 8-byte key ID is in a file) can write a checkpoint that loads. The
// README's Encryption section says so (the public key is a write key);
// this test pins the limit, so that a change that starts catching it
// updates the README.
func TestEncryptAcceptsACheckpointForgedWithThePublicKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, ours := t.TempDir(), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(ours))
	_, err := st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	forged := append([]byte(keyLine(ours.Recipient())), ageTo(t, plainBytes(t, 2, secretState{Step: 2, Secret: "forged"}), ours.Recipient())...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000002.json"), forged, 0o644))
	st = openStore[secretState](t, dir, checkpoint.Encrypt(ours), checkpoint.ReadOnly())
	v, _, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, "forged", v.Secret)
}

// What no file of an encrypting store tells: a rolling file replaced by an
// older rolling file of the same store, and a checkpoint copied from
// another store (another session) of the same key to the same step's
// name, both load as genuine. These limits are the encryption's: the
// header inside names the step and kind, not the store nor a sequence.
// The Encrypt doc says only "a deleted newest checkpoint" and "a whole
// store replaced by an older copy"; this test pins what else is not
// caught, so that a change that starts catching it updates the doc.
func TestEncryptDoesNotCatchAnOlderRollingFileNorACopyFromAnotherStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, other, id := t.TempDir(), t.TempDir(), newIdentity(t)
	opts := []checkpoint.Option{checkpoint.Encrypt(id), checkpoint.WithRolling(), checkpoint.SaveEvery(100)}
	st := openStore[secretState](t, dir, opts...)
	_, _, err := st.Tick(ctx, 6, secretAt(6))
	require.NoError(t, err)
	old := mustRead(t, filepath.Join(dir, "step_last.json"))
	_, _, err = st.Tick(ctx, 7, secretAt(7))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_last.json"), old, 0o644))
	st = openStore[secretState](t, dir, append(opts, checkpoint.ReadOnly())...)
	_, info, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(6), info.Step, "the rolling file rolled back unnoticed")
	require.NoError(t, st.Close())

	o := openStore[secretState](t, other, checkpoint.Encrypt(id))
	_, err = o.Save(ctx, 200, secretState{Step: 200, Secret: "from another store"})
	require.NoError(t, err)
	require.NoError(t, o.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000200.json"), mustRead(t, filepath.Join(other, "step_00000200.json")), 0o644))
	st = openStore[secretState](t, dir, append(opts, checkpoint.ReadOnly())...)
	v, _, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, "from another store", v.Secret)
}
