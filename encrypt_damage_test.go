package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

// failingReads is a backend whose reads of one object fail with the error
// fail makes after a number of bytes.
type failingReads struct {
	checkpoint.Backend
	name  string
	after int64
	fail  func() error
}

func (f *failingReads) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	rc, o, err := f.Backend.Open(ctx, name)
	if err != nil || name != f.name {
		return rc, o, err
	}
	return &failAfter{ReadCloser: rc, left: f.after, fail: f.fail}, o, nil
}

type failAfter struct {
	io.ReadCloser
	left int64
	fail func() error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, f.fail()
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	n, err := f.ReadCloser.Read(p)
	f.left -= int64(n)
	return n, err
}

// requireReadErrorIsNotDamage checks that a read of an encrypted
// checkpoint that fails with fail's error, at any byte (in its key line,
// its age header, its nonce, its first or a later chunk), is not
// ErrCorrupt, and that a save of its step does not move the file aside.
func requireReadErrorIsNotDamage(t *testing.T, fail func() error) {
	ctx := context.Background()
	id := newIdentity(t)
	const chunk = 64 << 10
	big := secretState{Step: 2, Secret: string(make([]byte, 3*chunk))}
	for _, after := range []int64{0, 35, 150, 260, chunk + 300, 2*chunk + 400} {
		dir := t.TempDir()
		st := openStore[secretState](t, dir, checkpoint.Encrypt(id))
		_, err := st.Save(ctx, 1, secretAt(1))
		require.NoError(t, err)
		_, err = st.Save(ctx, 2, big)
		require.NoError(t, err)
		require.NoError(t, st.Close())
		before := mustRead(t, filepath.Join(dir, "step_00000002.json"))
		require.Greater(t, int64(len(before)), after)

		raw, err := dirstore.Open(dir, dirstore.NoSync())
		require.NoError(t, err)
		st, err = checkpoint.OpenBackend[secretState](&failingReads{Backend: raw, name: "step_00000002.json", after: after, fail: fail}, checkpoint.Encrypt(id))
		require.NoError(t, err)
		_, _, err = st.Load(ctx, 2)
		require.Truef(t, errors.Is(err, syscall.EIO), "after %d bytes: the I/O error is lost: %v", after, err)
		require.Falsef(t, errors.Is(err, checkpoint.ErrCorrupt), "after %d bytes: an I/O error called damage: %v", after, err)
		_, err = st.Save(ctx, 2, secretAt(2))
		require.ErrorIsf(t, err, checkpoint.ErrExists, "after %d bytes", after)
		require.NoError(t, st.Close())
		require.Equalf(t, before, mustRead(t, filepath.Join(dir, "step_00000002.json")), "after %d bytes: moved aside", after)
		require.NoFileExists(t, filepath.Join(dir, "step_00000002.json.corrupt"))
	}
}

// A local file's read error (an *fs.PathError, as os.File gives) while an
// encrypted checkpoint is decrypted proves nothing about the file.
func TestEncryptFileReadErrorWhileDecryptingIsNotDamage(t *testing.T) {
	t.Parallel()
	requireReadErrorIsNotDamage(t, func() error { return &fs.PathError{Op: "read", Path: "step_00000002.json", Err: syscall.EIO} })
}

// So does a remote backend's (s3store's read error is a wrapped network
// error, no *fs.PathError): a connection reset in the middle of a GET must
// not move a good checkpoint aside.
func TestEncryptRemoteReadErrorWhileDecryptingIsNotDamage(t *testing.T) {
	t.Parallel()
	requireReadErrorIsNotDamage(t, func() error { return fmt.Errorf("s3store: read s3://b/step_00000002.json: %w", syscall.EIO) })
}

// A failed authentication is damage: a flipped byte in any chunk of a
// large checkpoint, or a truncation at any chunk boundary, is ErrCorrupt,
// Latest falls back past it, and a save of its step moves it aside.
func TestEncryptAuthenticationFailureIsDamageAtEveryChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := newIdentity(t)
	const chunk, tag = 64 << 10, 16
	src := t.TempDir()
	st := openStore[secretState](t, src, checkpoint.Encrypt(id))
	_, err := st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	_, err = st.Save(ctx, 2, secretState{Step: 2, Secret: string(make([]byte, 3*chunk))})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	one, two := mustRead(t, filepath.Join(src, "step_00000001.json")), mustRead(t, filepath.Join(src, "step_00000002.json"))
	// The chunks start after the key line, the age header (ending in the
	// line "--- <MAC>") and the 16-byte nonce.
	mac := bytes.Index(two, []byte("\n--- "))
	require.Positive(t, mac)
	start := mac + 1 + bytes.IndexByte(two[mac+1:], '\n') + 1 + 16
	require.Less(t, start, len(two), "no age header found")
	var cases [][]byte
	for k := 1; start+k*(chunk+tag) < len(two); k++ {
		cut := start + k*(chunk+tag)
		cases = append(cases, two[:cut]) // a truncation at a chunk boundary
		flip := append([]byte(nil), two...)
		flip[cut-1] ^= 0x80 // the tag of chunk k
		cases = append(cases, flip)
	}
	flip := append([]byte(nil), two...)
	flip[len(flip)-1] ^= 1
	cases = append(cases, flip, two[:start], two[:start-1])
	for i, data := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "step_00000001.json"), one)
			writeFile(t, filepath.Join(dir, "step_00000002.json"), data)
			st := openStore[secretState](t, dir, checkpoint.Encrypt(id))
			_, _, err := st.Load(ctx, 2)
			require.ErrorIsf(t, err, checkpoint.ErrCorrupt, "case %d", i)
			_, info, err := st.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), info.Step)
			_, err = st.Save(ctx, 2, secretAt(2))
			require.NoErrorf(t, err, "case %d: not moved aside", i)
			require.FileExists(t, filepath.Join(dir, "step_00000002.json.corrupt"))
			require.NoError(t, st.Close())
		})
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o644))
}
