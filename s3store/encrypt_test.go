package s3store

import (
	"context"
	"io"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/internal/sealed"
)

// An encrypting store keeps the whole Backend contract on S3: the store's
// encryption wraps s3store's backend and every promise holds through it.
func TestEncryptedConformance(t *testing.T) {
	f := newFixture(t)
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	k, err := sealed.NewKeys(id, nil, false)
	require.NoError(t, err)
	backendtest.Run(t, func(t *testing.T) backendtest.Opener {
		prefix := "sealed-" + randomHex(6)
		return func() (checkpoint.Backend, error) {
			b, err := New(f.client, f.bucket, prefix, LeaseTTL(testTTL))
			if err != nil {
				return nil, err
			}
			return sealed.Wrap(b, k), nil
		}
	}, backendtest.LeaseTTL(testTTL))
}

// An encrypted store on S3 writes only encrypted objects, reads them back,
// stops at a key not given, and rotates to a new key with Reencrypt.
func TestEncryptedStoreOnS3(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	b, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	const secret = "the-secret-of-the-run"
	s, err := openStore(t, f, "enc", checkpoint.Encrypt(a))
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, state{Writer: secret, Step: step}, checkpoint.WithMeta("m", secret))
		require.NoError(t, err)
	}
	require.NoError(t, s.WriteJSON(ctx, "result.json", state{Writer: secret}))
	require.NoError(t, s.Close())

	raw := f.backend("enc")
	defer raw.Close()
	objs, err := raw.List(ctx)
	require.NoError(t, err)
	require.Len(t, objs, 4)
	for _, o := range objs {
		rc, _, err := raw.Open(ctx, o.Name)
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		require.True(t, strings.HasPrefix(string(data), "checkpoint-age-v1 "+checkpoint.KeyID(a.Recipient())+"\n"), o.Name)
		require.NotContains(t, string(data), secret, o.Name)
	}

	s, err = openStore(t, f, "enc", checkpoint.Encrypt(b), checkpoint.ReadOnly())
	require.NoError(t, err)
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrNoKey)
	require.NoError(t, s.Close())

	rb := f.backend("enc")
	defer rb.Close()
	got, err := checkpoint.Reencrypt(ctx, rb, checkpoint.Encrypt(b, a))
	require.NoError(t, err)
	require.Len(t, got.Rewritten, 4)
	s, err = openStore(t, f, "enc", checkpoint.Encrypt(b))
	require.NoError(t, err)
	defer s.Close()
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), info.Step)
	require.Equal(t, state{Writer: secret, Step: 3}, v)
	infos, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, secret, infos[0].Meta["m"])
}
