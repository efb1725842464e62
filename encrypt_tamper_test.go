package checkpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
)

// The tamper tests edit the files of an encrypting store as someone who can
// write them but holds no key would, and prove that the store never returns
// the state of an edited file: Load is ErrCorrupt, and Latest falls back to
// the step before.

// tamperState is a state of step whose encoding spans several of age's
// 64 KiB chunks when pad is large.
func tamperState(step int64, pad int) paddedState {
	return paddedState{Step: step, Pad: randomText(step, pad)}
}

// sealedLayout locates the parts of a sealed file: the key line ends at
// keyLine, the age header (with its MAC line) at header, the payload
// nonce at nonce; the chunks follow, each 64 KiB of payload and a 16-byte
// tag.
type sealedLayout struct {
	keyLine, header, nonce int
}

const sealedChunk = 64<<10 + 16

func layoutOf(t *testing.T, b []byte) sealedLayout {
	t.Helper()
	keyLine := bytes.IndexByte(b, '\n') + 1
	require.True(t, strings.HasPrefix(string(b), format.SealedMagic), "the file is sealed")
	mac := bytes.Index(b[keyLine:], []byte("\n--- "))
	require.Positive(t, mac)
	end := bytes.IndexByte(b[keyLine+mac+1:], '\n')
	require.Positive(t, end)
	header := keyLine + mac + 1 + end + 1
	return sealedLayout{keyLine: keyLine, header: header, nonce: header + 16}
}

// tamperStore saves steps 1 to 3 in an encrypting store in a new
// directory, step 3 large enough for four chunks, and returns the
// directory, the path of step 3 and its bytes.
func tamperStore(t *testing.T, id *age.X25519Identity, opts ...checkpoint.Option) (string, string, []byte) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := checkpoint.Open[paddedState](dir, append([]checkpoint.Option{checkpoint.NoSync(), checkpoint.WithLayout("turn", 3), checkpoint.Encrypt(id)}, opts...)...)
	require.NoError(t, err)
	var last checkpoint.Info
	for step := int64(1); step <= 3; step++ {
		last, err = s.Save(ctx, step, tamperState(step, map[int64]int{1: 100, 2: 5000, 3: 200 << 10}[step]))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	b, err := os.ReadFile(last.Path)
	require.NoError(t, err)
	return dir, last.Path, b
}

// requireTamperedStep3 opens the store in dir, proves that Load(3) is
// ErrCorrupt and that Latest returns step 2's state, never step 3's.
func requireTamperedStep3(t *testing.T, dir string, what string, opts ...checkpoint.Option) {
	t.Helper()
	ctx := context.Background()
	s, err := checkpoint.Open[paddedState](dir, append([]checkpoint.Option{checkpoint.NoSync(), checkpoint.WithLayout("turn", 3)}, opts...)...)
	require.NoError(t, err, what)
	defer s.Close()
	_, _, err = s.Load(ctx, 3)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt, what)
	got, info, err := s.Latest(ctx)
	require.NoError(t, err, what)
	require.Equal(t, int64(2), info.Step, what)
	require.Equal(t, tamperState(2, 5000), got, what)
}

// A flipped byte anywhere in an encrypted checkpoint (its key line, the
// age header, the nonce, the first, a middle or the last chunk) makes it
// ErrCorrupt, and Latest falls back to the step before: the edited step's
// state is never returned.
func TestEncryptedFlippedByteIsCorruptAndLatestFallsBack(t *testing.T) {
	t.Parallel()
	id := newIdentity(t)
	dir, path, orig := tamperStore(t, id)
	l := layoutOf(t, orig)
	require.Greater(t, len(orig), l.nonce+3*sealedChunk, "step 3 spans four chunks")

	offsets := []int{0, 5, len(format.SealedMagic) - 1, len(format.SealedMagic), l.keyLine - 2, l.keyLine - 1, // key line
		l.keyLine, l.keyLine + 10, l.keyLine + 30, l.keyLine + 60, l.header - 20, l.header - 2, // age header, stanza, MAC
		l.header, l.header + 8, l.nonce - 1, // nonce
		l.nonce, l.nonce + 1000, l.nonce + sealedChunk - 1, // first chunk, its tag
		l.nonce + sealedChunk, l.nonce + 2*sealedChunk - 17, l.nonce + 2*sealedChunk + 4321, // middle chunks
		len(orig) - 17, len(orig) - 16, len(orig) - 1, // last chunk and its tag
	}
	for i, off := range offsets {
		for _, bit := range []byte{0x01, 0x80} {
			t.Run(fmt.Sprintf("offset%d-bit%02x", off, bit), func(t *testing.T) {
				t.Parallel()
				copyDir := t.TempDir()
				require.NoError(t, os.CopyFS(copyDir, os.DirFS(dir)))
				b := bytes.Clone(orig)
				b[off] ^= bit
				require.NoError(t, os.WriteFile(filepath.Join(copyDir, filepath.Base(path)), b, 0o644))
				requireTamperedStep3(t, copyDir, fmt.Sprintf("sample %d: byte %d of %d flipped (%#x)", i, off, len(orig), bit), checkpoint.Encrypt(id))
			})
		}
	}
}

// A truncation anywhere, and in particular at a boundary between two
// chunks (where what is left is a whole sequence of authenticated chunks),
// is ErrCorrupt: age marks the last chunk, so a file cut after any other
// is incomplete.
func TestEncryptedTruncationIsCorruptEvenAtAChunkBoundary(t *testing.T) {
	t.Parallel()
	id := newIdentity(t)
	dir, path, orig := tamperStore(t, id)
	l := layoutOf(t, orig)
	for _, n := range []int{0, 1, l.keyLine - 1, l.keyLine, l.header, l.nonce, l.nonce + sealedChunk, l.nonce + 2*sealedChunk, l.nonce + 3*sealedChunk, l.nonce + 3*sealedChunk + 1, len(orig) - 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			copyDir := t.TempDir()
			require.NoError(t, os.CopyFS(copyDir, os.DirFS(dir)))
			require.NoError(t, os.WriteFile(filepath.Join(copyDir, filepath.Base(path)), orig[:n], 0o644))
			requireTamperedStep3(t, copyDir, fmt.Sprintf("cut to %d of %d bytes", n, len(orig)), checkpoint.Encrypt(id))
		})
	}
}

// The header inside the ciphertext must match the file's name: a
// checkpoint copied to another step's name, or an older one copied over a
// newer step's, is ErrCorrupt, though it authenticates.
func TestEncryptedFileUnderAnotherStepsNameIsCorrupt(t *testing.T) {
	t.Parallel()
	id := newIdentity(t)
	ctx := context.Background()
	t.Run("older over newer", func(t *testing.T) {
		t.Parallel()
		dir, path, _ := tamperStore(t, id)
		old, err := os.ReadFile(filepath.Join(dir, "turn_001.json"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, old, 0o644))
		requireTamperedStep3(t, dir, "step 1's file at step 3's name", checkpoint.Encrypt(id))
	})
	t.Run("copied to a new name", func(t *testing.T) {
		t.Parallel()
		dir, path, b := tamperStore(t, id)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "turn_004.json"), b, 0o644))
		s := openStore[paddedState](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.Encrypt(id))
		_, _, err := s.Load(ctx, 4)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		got, info, err := s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), info.Step, "Latest falls back past the copy to the original")
		require.Equal(t, tamperState(3, 200<<10), got)
		requireUntouched(t, path, b)
	})
}

// The key line is not authenticated, so it is checked against the key
// that opens the file: rewritten to name another key the store holds, or
// one it does not, the file is damage (ErrCorrupt), never ErrNoKey and
// never loaded.
func TestEncryptedKeyLineRewrittenToAnotherKeyIsDamage(t *testing.T) {
	t.Parallel()
	a, b, c := newIdentity(t), newIdentity(t), newIdentity(t)
	for name, other := range map[string]*age.X25519Identity{"known": b, "unknown": c} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, path, orig := tamperStore(t, a)
			kid := checkpoint.KeyID(a.Recipient())
			edited := bytes.Replace(orig, []byte(kid), []byte(checkpoint.KeyID(other.Recipient())), 1)
			require.NotEqual(t, orig, edited)
			require.NoError(t, os.WriteFile(path, edited, 0o644))
			requireTamperedStep3(t, dir, "key line naming "+name+" key", checkpoint.Encrypt(a, b))
		})
	}
}

// A Save of a step whose file is provably damaged moves that file aside
// and saves; a Save of a step whose file no key given opens (ErrNoKey)
// never moves it aside nor replaces it: it may be good.
func TestEncryptedSaveMovesAsideDamageButNeverAFileOfAnotherKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := newIdentity(t)

	t.Run("damaged", func(t *testing.T) {
		t.Parallel()
		dir, path, orig := tamperStore(t, id)
		b := bytes.Clone(orig)
		b[len(b)/2] ^= 1
		require.NoError(t, os.WriteFile(path, b, 0o644))
		s := openStore[paddedState](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.Encrypt(id))
		_, err := s.Save(ctx, 3, tamperState(3, 10))
		require.NoError(t, err)
		got, _, err := s.Load(ctx, 3)
		require.NoError(t, err)
		require.Equal(t, tamperState(3, 10), got)
		aside := slices.DeleteFunc(dirNames(t, dir), func(n string) bool { return !strings.HasPrefix(n, "turn_003.json.corrupt") })
		require.Len(t, aside, 1, "the damaged file is moved aside")
		requireUntouched(t, filepath.Join(dir, aside[0]), b)
	})

	t.Run("another key", func(t *testing.T) {
		t.Parallel()
		other := newIdentity(t)
		dir, path, orig := tamperStore(t, other)
		s := openStore[paddedState](t, dir, checkpoint.WithLayout("turn", 3), checkpoint.Encrypt(id))
		_, _, err := s.Load(ctx, 3)
		require.ErrorIs(t, err, checkpoint.ErrNoKey)
		require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
		require.ErrorContains(t, err, checkpoint.KeyID(other.Recipient()), "the error names the missing key")
		_, _, err = s.Latest(ctx)
		require.ErrorIs(t, err, checkpoint.ErrNoKey, "Latest stops: no fresh start, no older step")
		_, err = s.Save(ctx, 3, tamperState(3, 10))
		require.Error(t, err)
		require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
		requireUntouched(t, path, orig)
		for _, n := range dirNames(t, dir) {
			require.NotContains(t, n, ".corrupt", "nothing is moved aside")
		}
	})
}
