package checkpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/sealed"
)

// testdata/encrypted holds, sealed with the test-only identity in
// testdata/encrypted/identity.txt (public: see the README there), every
// golden plaintext checkpoint (internal/format/testdata/vN, N = 1, 2, 3)
// and the golden root of sessions (testdata/v1/sessions): what an
// encrypting store writes, as it first wrote it. They must open forever:
// never regenerate or edit them. age encrypts with fresh randomness, so
// they cannot be compared byte for byte with what today's writer writes:
// what they hold, once opened, is compared with the plaintext golden
// files instead.

var (
	goldenEncryptedDir = filepath.Join("testdata", "encrypted")
	goldenIdentityFile = filepath.Join(goldenEncryptedDir, "identity.txt")
	// goldenEncryptedFormats are the versions of the plaintext golden
	// checkpoints sealed: each has a directory in goldenEncryptedDir.
	goldenEncryptedFormats = []int{1, 2, 3}
)

// goldenIdentity returns the test-only identity of testdata/encrypted.
func goldenIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	f, err := os.Open(goldenIdentityFile)
	require.NoError(t, err)
	defer f.Close()
	ids, err := age.ParseIdentities(f)
	require.NoError(t, err)
	require.Len(t, ids, 1)
	id, ok := ids[0].(*age.X25519Identity)
	require.True(t, ok)
	return id
}

// goldenSealedPairs returns each encrypted golden file under
// goldenEncryptedDir with the plaintext golden file it seals.
func goldenSealedPairs(t *testing.T) map[string]string {
	t.Helper()
	pairs := map[string]string{}
	add := func(from, to string) {
		require.NoError(t, filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() == dirstore.LockName {
				return err
			}
			rel, err := filepath.Rel(from, path)
			if err == nil {
				pairs[filepath.Join(to, rel)] = path
			}
			return err
		}))
	}
	for _, v := range goldenEncryptedFormats {
		add(goldenDir(v), filepath.Join(goldenEncryptedDir, fmt.Sprintf("v%d", v)))
	}
	add(goldenSessionsDir, filepath.Join(goldenEncryptedDir, "sessions"))
	return pairs
}

// TestWriteGoldenEncrypted writes the encrypted golden files that
// testdata/encrypted lacks (and the identity, if it lacks it). It never
// rewrites a file that exists, and runs only when asked:
// CHECKPOINT_WRITE_GOLDEN=encrypted go test -run WriteGoldenEncrypted
func TestWriteGoldenEncrypted(t *testing.T) {
	if os.Getenv("CHECKPOINT_WRITE_GOLDEN") != "encrypted" {
		t.Skip("golden files are written once")
	}
	if _, err := os.Stat(goldenIdentityFile); err != nil {
		id, err := age.GenerateX25519Identity()
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(goldenEncryptedDir, 0o755))
		text := "# A TEST-ONLY identity, public: it encrypts the golden files beside it.\n# Never use it to protect anything.\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n"
		require.NoError(t, os.WriteFile(goldenIdentityFile, []byte(text), 0o644))
	}
	k, err := sealed.NewKeys(goldenIdentity(t), nil, false)
	require.NoError(t, err)
	for sealedPath, plainPath := range goldenSealedPairs(t) {
		if _, err := os.Stat(sealedPath); err == nil {
			continue
		}
		plain, err := os.ReadFile(plainPath)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, k.Seal(func(w io.Writer) error { _, err := w.Write(plain); return err })(&buf))
		require.NoError(t, os.MkdirAll(filepath.Dir(sealedPath), 0o755))
		require.NoError(t, os.WriteFile(sealedPath, buf.Bytes(), 0o644))
	}
}

// Every encrypted golden file is sealed to the test identity, and opens
// to exactly the bytes of the plaintext golden file it seals.
func TestGoldenEncryptedFilesSealThePlaintextGoldens(t *testing.T) {
	t.Parallel()
	id := goldenIdentity(t)
	k, err := sealed.NewKeys(id, nil, false)
	require.NoError(t, err)
	pairs := goldenSealedPairs(t)
	require.GreaterOrEqual(t, len(pairs), 15)
	for sealedPath, plainPath := range pairs {
		b, err := os.ReadFile(sealedPath)
		require.NoError(t, err, "an encrypted golden file is missing: CHECKPOINT_WRITE_GOLDEN=encrypted go test -run WriteGoldenEncrypted writes it")
		require.True(t, bytes.HasPrefix(b, []byte(format.SealedMagic+checkpoint.KeyID(id.Recipient())+"\n")), sealedPath)
		r, _, err := k.Open(bytes.NewReader(b), sealedPath)
		require.NoError(t, err, sealedPath)
		got, err := io.ReadAll(r)
		require.NoError(t, err, sealedPath)
		require.Equal(t, mustRead(t, plainPath), got, sealedPath)
	}
}

// A store with the test identity lists and loads the encrypted golden
// checkpoints of every format version as a plaintext store does the
// plaintext ones: the same Infos (but their locations), and the same
// states and byte payloads.
func TestGoldenEncryptedLoads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := goldenIdentity(t)
	for _, v := range goldenEncryptedFormats {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			t.Parallel()
			plain := openStore[goldenState](t, goldenDir(v), checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
			enc := openStore[goldenState](t, filepath.Join(goldenEncryptedDir, fmt.Sprintf("v%d", v)), checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly(), checkpoint.Encrypt(id))
			want, err := plain.List(ctx)
			require.NoError(t, err)
			got, err := enc.List(ctx)
			require.NoError(t, err)
			require.Len(t, got, len(want))
			for i := range want {
				w, g := want[i], got[i]
				name := w.Name()
				require.Equal(t, name, g.Name())
				w.Location, w.Path, g.Location, g.Path = "", "", "", ""
				require.Equal(t, w, g)
				if w.Payload == checkpoint.PayloadBytes {
					wr, _, err := plain.OpenPayloadExact(ctx, want[i])
					require.NoError(t, err)
					wb, err := io.ReadAll(wr)
					wr.Close()
					require.NoError(t, err)
					gr, info, err := enc.OpenPayloadExact(ctx, got[i])
					require.NoError(t, err)
					gb, err := io.ReadAll(gr)
					gr.Close()
					require.NoError(t, err)
					require.Equal(t, wb, gb, name)
					require.Equal(t, v, info.Format)
					continue
				}
				state, info, err := enc.Load(ctx, w.Step)
				require.NoError(t, err, name)
				require.Equal(t, goldenStateAt(w.Step), state)
				require.Equal(t, v, info.Format)
				require.Equal(t, name, info.Name())
			}
		})
	}
	t.Run("sessions", func(t *testing.T) {
		t.Parallel()
		requireGoldenSessions(t, filepath.Join(goldenEncryptedDir, "sessions"), checkpoint.Encrypt(id))
	})
}

// Opened without their key (no Encrypt, or Encrypt with another
// identity), the encrypted golden files are ErrNoKey: never ErrCorrupt,
// never moved aside, not even by a writable store's Latest or Save, and
// never a fresh start.
func TestGoldenEncryptedWithoutTheKeyIsErrNoKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	other := newIdentity(t)
	for _, v := range goldenEncryptedFormats {
		for name, opts := range map[string][]checkpoint.Option{"no key": nil, "another key": {checkpoint.Encrypt(other)}} {
			t.Run(fmt.Sprintf("v%d/%s", v, name), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(goldenEncryptedDir, fmt.Sprintf("v%d", v)))))
				before := map[string][]byte{}
				for _, n := range dirNames(t, dir) {
					before[n] = mustRead(t, filepath.Join(dir, n))
				}
				s := openStore[goldenState](t, dir, append([]checkpoint.Option{checkpoint.WithLayout("turn", 3)}, opts...)...)
				_, _, err := s.Latest(ctx)
				requireNoKey(t, err)
				_, _, err = s.LatestPayload(ctx)
				requireNoKey(t, err)
				list, err := s.List(ctx)
				if err == nil {
					for _, info := range list {
						_, _, err := s.LoadExact(ctx, info)
						requireNoKey(t, err)
					}
				} else {
					requireNoKey(t, err)
				}
				for _, g := range goldenFiles {
					if v == 3 {
						break
					}
					_, _, err := s.Load(ctx, g.Step)
					requireNoKey(t, err)
					if g.Kind != checkpoint.KindStep {
						continue // a Save beside an error, final or rolling checkpoint is no conflict
					}
					_, err = s.Save(ctx, g.Step, goldenStateAt(g.Step))
					require.Error(t, err, g.Name)
					require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
				}
				require.NoError(t, s.Close())
				after := checkpointNames(t, dir)
				require.Len(t, after, len(before), "nothing moved aside, nothing added: %q", after)
				for n, b := range before {
					require.Equal(t, b, mustRead(t, filepath.Join(dir, n)), n)
				}
			})
		}
	}
}

func requireNoKey(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, checkpoint.ErrNoKey)
	require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
	require.False(t, strings.Contains(err.Error(), "moved aside"), err.Error())
}

// Opened without its key, the encrypted golden root of sessions lists
// each session with ErrNoKey, a session's Latest is ErrNoKey, and no file
// changes.
func TestGoldenEncryptedSessionsWithoutTheKeyAreErrNoKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(goldenEncryptedDir, "sessions"))))
	before := map[string][]byte{}
	for _, id := range []string{"001", "002"} {
		for _, n := range dirNames(t, filepath.Join(dir, id)) {
			before[filepath.Join(id, n)] = mustRead(t, filepath.Join(dir, id, n))
		}
	}
	r := openSessions(t, dir, checkpoint.WithLayout("turn", 3))
	list, err := r.List(ctx)
	if err != nil {
		requireNoKey(t, err)
	} else {
		require.Len(t, list, 2, "no session is hidden")
	}
	for _, s := range list {
		requireNoKey(t, s.Err)
	}
	st, err := checkpoint.OpenSessionStore[goldenState](r, "002")
	if err == nil {
		_, _, err = st.Latest(ctx)
		require.NoError(t, st.Close())
	}
	requireNoKey(t, err)
	require.NoError(t, r.Close())
	for n, b := range before {
		require.Equal(t, b, mustRead(t, filepath.Join(dir, n)), n)
	}
	for _, id := range []string{"001", "002"} {
		for _, n := range dirNames(t, filepath.Join(dir, id)) {
			require.NotContains(t, n, ".corrupt")
		}
	}
}
